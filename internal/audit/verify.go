package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
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
	// kept elsewhere (a logged head).
	Last string
	// Keyed counts the records whose HMAC was checked; Unkeyed those
	// with a plain SHA-256 hash (before the first keyed one, when keys
	// were given: written before audit.hmac_key_file was set).
	Keyed, Unkeyed int
	// Head is set when the files were compared with a head, and agree.
	Head *Head
}

// BrokenError names the first record at which a chain breaks.
type BrokenError struct {
	File    string
	Line    int
	Problem string
}

// Error implements error: "file:line: problem".
func (e *BrokenError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Problem) }

// KeyRequiredError says that the chain is keyed (audit.hmac_key_file) and
// Verify was given no key: its hashes cannot be checked without it.
type KeyRequiredError struct {
	File  string
	Line  int
	KeyID string
}

// Error implements error.
func (e *KeyRequiredError) Error() string {
	return fmt.Sprintf("%s:%d: the chain is keyed (HMAC-SHA256, key id %s) from here on; its hashes cannot be checked without the key: give audit.hmac_key_file with -key-file",
		e.File, e.Line, e.KeyID)
}

// VerifyOptions are what Verify checks beyond the chain itself.
type VerifyOptions struct {
	// Keys are HMAC keys (audit.hmac_key_file, present and past); a
	// keyed record is checked with the one its key_id names. When keys
	// are given, the chain must be keyed: plain hashes are accepted only
	// before its first keyed record.
	Keys [][]byte
	// Head, when set, is compared with the files (see head.go): the file
	// it names must be among them and hold at least its records, the last
	// of them the one it names.
	Head *Head
}

// Verify checks the chain through files with no key and no head (see
// VerifyOptions.Verify).
func Verify(files ...string) (Summary, error) { return VerifyOptions{}.Verify(files...) }

// Verify checks the chain through files, given oldest first (rotated files
// in the order of their numbers, then the current file): every line must
// be a record whose hash matches its content and whose prev_hash is the
// hash of the record before it, across files. It returns a *BrokenError for
// the first record that fails, a *KeyRequiredError for a keyed record when
// no key was given, a *HeadMismatchError when the files hold less than
// o.Head names, or the error of a file that cannot be read.
func (o VerifyOptions) Verify(files ...string) (Summary, error) {
	var sum Summary
	keys := map[string]*hasher{}
	for _, k := range o.Keys {
		keys[KeyID(k)] = newHasher(k)
	}
	target := -1
	if o.Head != nil {
		if target = headTarget(*o.Head, files); target < 0 {
			return sum, fmt.Errorf("the head names %s (%d records), which is not among the files given", o.Head.File, o.Head.Records)
		}
	}
	prev, prevLine := "", []byte(nil) // unknown before the first record
	for i, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return sum, err
		}
		var lines int64
		var atHead []byte
		err = eachLine(f, func(n int, line []byte) error {
			if sum.Records == 0 {
				sum.Anchored = strings.Contains(string(line), `"prev_hash":"`+GenesisHash+`","hash":"`)
			}
			c := checkLine(line, prev, prevLine, keys)
			switch {
			case c.noKey && len(keys) == 0:
				return &KeyRequiredError{File: name, Line: n, KeyID: c.keyID}
			case c.noKey:
				return &BrokenError{File: name, Line: n, Problem: fmt.Sprintf(
					"is keyed with key id %s, which none of the keys given has (theirs: %s)", c.keyID, strings.Join(sortedIDs(keys), ", "))}
			case c.problem != "":
				return &BrokenError{File: name, Line: n, Problem: c.problem}
			case len(keys) > 0 && c.keyID == "" && sum.Keyed > 0:
				return &BrokenError{File: name, Line: n, Problem: "has a plain SHA-256 hash after keyed records (rewritten by someone without the key?)"}
			}
			if c.keyID != "" {
				sum.Keyed++
			} else {
				sum.Unkeyed++
			}
			prev, prevLine, sum.Last = c.hash, line, c.hash
			sum.Records++
			lines = int64(n)
			if i == target && lines == o.Head.Records {
				atHead = bytes.Clone(line)
			}
			return nil
		})
		f.Close()
		if err != nil {
			return sum, err
		}
		sum.Files++
		if i == target {
			if err := o.Head.compare(name, lines, atHead); err != nil {
				return sum, err
			}
		}
	}
	if len(keys) > 0 && sum.Keyed == 0 && sum.Records > 0 {
		return sum, fmt.Errorf("no record is keyed, yet keys were given: the files were written without audit.hmac_key_file, or rewritten without the key")
	}
	sum.Head = o.Head
	return sum, nil
}

// sortedIDs returns the key ids of keys, sorted.
func sortedIDs(keys map[string]*hasher) []string {
	ids := make([]string, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
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
