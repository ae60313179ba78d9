package audit

import (
	"encoding/json"
	"os"
)

// Reading the chain for a person (the operator's console): the files of
// the file sink, and the newest records that pass a filter, a page at a
// time.

// Files returns the files of the file sink at path, oldest first: the
// rotated files in the order of their numbers, then path itself (when it
// exists). The order Verify and Query take.
func Files(path string) ([]string, error) {
	seqs, err := rotatedSeqs(path)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(seqs)+1)
	for _, n := range seqs {
		out = append(out, rotatedName(path, n))
	}
	if _, err := os.Stat(path); err == nil {
		out = append(out, path)
	}
	return out, nil
}

// Newest returns the records of files (oldest first) that pass f, newest
// first, skipping the skip newest and returning at most limit, and how
// many records passed f in all. It reads every file once and holds at
// most skip+limit records; lines that are not records are skipped, and
// the chain is not checked (Verify does).
func Newest(f Filter, skip, limit int, files ...string) (recs []Record, matched int, err error) {
	keep := skip + limit
	if keep <= 0 {
		return nil, 0, nil
	}
	ring := make([]Record, 0, min(keep, 1024))
	next := 0 // where the next record goes once the ring is full
	for _, name := range files {
		in, err := os.Open(name)
		if err != nil {
			return nil, matched, err
		}
		err = eachLine(in, func(_ int, line []byte) error {
			var r Record
			if json.Unmarshal(line, &r) != nil || !f.Match(&r) {
				return nil
			}
			matched++
			if len(ring) < keep {
				ring = append(ring, r)
				return nil
			}
			ring[next] = r
			next = (next + 1) % keep
			return nil
		})
		in.Close()
		if err != nil {
			return nil, matched, err
		}
	}
	// ring holds the newest records, oldest at next once it wrapped.
	ordered := make([]Record, 0, len(ring))
	for i := range ring {
		ordered = append(ordered, ring[(next+len(ring)-1-i)%len(ring)])
	}
	if skip >= len(ordered) {
		return nil, matched, nil
	}
	return ordered[skip:], matched, nil
}
