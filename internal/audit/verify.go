package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Summary is what Verify found in an intact chain.
type Summary struct {
	// Files and Records count what was checked.
	Files, Records int
	// Anchored is set when the first record is the first of a chain
	// (prev_hash is GenesisHash); otherwise the files start after records
	// that were not given, such as rotated files already deleted.
	Anchored bool
	// Last is the hash of the last record, to be compared with a copy
	// kept elsewhere: records removed from the end leave no other trace.
	Last string
}

// BrokenError names the first record at which a chain breaks.
type BrokenError struct {
	File    string
	Line    int
	Problem string
}

// Error implements error: "file:line: problem".
func (e *BrokenError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Problem) }

// Verify checks the chain through files, given oldest first (rotated files
// in the order of their numbers, then the current file): every line must
// be a record whose hash matches its content and whose prev_hash is the
// hash of the record before it, across files. It returns a *BrokenError for
// the first record that fails, or the error of a file that cannot be read.
func Verify(files ...string) (Summary, error) {
	var sum Summary
	prev, prevLine := "", []byte(nil) // unknown before the first record
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return sum, err
		}
		err = eachLine(f, func(n int, line []byte) error {
			if sum.Records == 0 {
				sum.Anchored = strings.Contains(string(line), `"prev_hash":"`+GenesisHash+`","hash":"`)
			}
			hash, problem := checkLine(line, prev, prevLine)
			if problem != "" {
				return &BrokenError{File: name, Line: n, Problem: problem}
			}
			prev, prevLine, sum.Last = hash, line, hash
			sum.Records++
			return nil
		})
		f.Close()
		if err != nil {
			return sum, err
		}
		sum.Files++
	}
	return sum, nil
}

// eachLine calls fn with each line of r (1-based number, no newline), of
// any length, stopping at fn's first error.
func eachLine(r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if ferr := fn(n, trimNewline(line)); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func trimNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		return b[:len(b)-1]
	}
	return b
}

// Filter selects records; zero fields match everything.
type Filter struct {
	InstanceID string
	Tenant     string
	Broker     string
	// Status is an exact status ("404") or a class ("4xx").
	Status string
	// Since and Until bound Time: Since <= Time < Until.
	Since, Until time.Time
}

// ParseStatus checks a Filter.Status value.
func ParseStatus(s string) error {
	if s == "" {
		return nil
	}
	if len(s) == 3 && s[0] >= '1' && s[0] <= '5' && strings.ToLower(s[1:]) == "xx" {
		return nil
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 100 && n <= 599 {
		return nil
	}
	return fmt.Errorf("status %q: want a status such as 404 or a class such as 4xx", s)
}

// Match reports whether r passes f.
func (f Filter) Match(r *Record) bool {
	switch {
	case f.InstanceID != "" && r.InstanceID != f.InstanceID,
		f.Tenant != "" && r.Tenant != f.Tenant,
		f.Broker != "" && r.Broker != f.Broker,
		!f.Since.IsZero() && r.Time.Before(f.Since),
		!f.Until.IsZero() && !r.Time.Before(f.Until):
		return false
	}
	if f.Status == "" {
		return true
	}
	code := strconv.Itoa(r.Status)
	if strings.HasSuffix(strings.ToLower(f.Status), "xx") {
		return len(code) == 3 && code[0] == f.Status[0]
	}
	return code == f.Status
}

// Query writes to out each line of the files whose record passes f, as it
// is in the file. Lines that are not records are skipped; it does not
// check the chain (Verify does).
func Query(out io.Writer, f Filter, files ...string) (matched int, err error) {
	for _, name := range files {
		in, err := os.Open(name)
		if err != nil {
			return matched, err
		}
		err = eachLine(in, func(_ int, line []byte) error {
			var r Record
			if json.Unmarshal(line, &r) != nil || !f.Match(&r) {
				return nil
			}
			matched++
			_, err := out.Write(append(line, '\n'))
			return err
		})
		in.Close()
		if err != nil {
			return matched, err
		}
	}
	return matched, nil
}
