package config

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one thing wrong with a configuration file.
type Problem struct {
	// Path is the YAML path of the offending value, such as
	// "brokers[2].url"; empty for problems with the file as a whole (YAML
	// syntax errors).
	Path string
	// Message says what is wrong, for a person. It never contains a secret.
	Message string
	// Line is the line of the value Path names or, for a missing key, of
	// the nearest enclosing value that is written down; zero when unknown.
	Line int
}

// String formats p as "path: message", or the message alone when p has no
// path.
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Problems is every problem found in one configuration, in document order.
// Load and Parse return it as their error; match it with errors.As.
type Problems struct {
	// List holds the problems, sorted by line and then by the order in
	// which they were found. It is never empty in a returned error.
	List []Problem

	seen map[string]bool // paths that already have a problem
}

// Error returns one line per problem, "path: message".
func (ps *Problems) Error() string {
	lines := make([]string, len(ps.List))
	for i, p := range ps.List {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Len returns the number of problems.
func (ps *Problems) Len() int { return len(ps.List) }

// addf records a problem at path unless path already has one: the first
// problem found for a value (say, an undefined variable) explains the later
// ones (say, "is required"), so those are dropped.
func (ps *Problems) addf(path, format string, args ...any) {
	if ps.seen == nil {
		ps.seen = make(map[string]bool)
	}
	if path != "" && ps.seen[path] {
		return
	}
	ps.seen[path] = true
	ps.List = append(ps.List, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// suppress drops later problems at path: one already reported explains
// them.
func (ps *Problems) suppress(path string) {
	if ps.seen == nil {
		ps.seen = make(map[string]bool)
	}
	ps.seen[path] = true
}

// err returns ps as an error, or nil when there are no problems.
func (ps *Problems) err() error {
	if len(ps.List) == 0 {
		return nil
	}
	return ps
}

// position is where a value starts in the YAML text.
type position struct{ line, column int }

// sortByPosition fills in each problem's Line from pos (and names it in
// the message when the message does not yet) and sorts the list into
// document order. Problems at the same position keep the order in
// which they were found.
func (ps *Problems) sortByPosition(pos map[string]position) {
	at := make([]position, len(ps.List))
	for i := range ps.List {
		at[i] = lookupPosition(pos, ps.List[i].Path)
		p := &ps.List[i]
		p.Line = at[i].line
		// Decoding problems name their line in the message; the checks
		// after decoding (a bad URL, a duplicate name, an unknown broker)
		// learn it here, so every message says where to look.
		if p.Line > 0 && p.Path != "" && !strings.Contains(p.Message, "(line ") {
			p.Message = fmt.Sprintf("%s (line %d)", p.Message, p.Line)
		}
	}
	idx := make([]int, len(ps.List))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		pa, pb := at[idx[a]], at[idx[b]]
		if pa.line != pb.line {
			return pa.line < pb.line
		}
		return pa.column < pb.column
	})
	sorted := make([]Problem, len(idx))
	for i, j := range idx {
		sorted[i] = ps.List[j]
	}
	ps.List = sorted
}

// lookupPosition returns the position of path or of its nearest ancestor
// that appears in pos ("a.b[2].c" → "a.b[2]" → "a.b" → "a" → "").
func lookupPosition(pos map[string]position, path string) position {
	for path != "" {
		if p, ok := pos[path]; ok {
			return p
		}
		path = parentPath(path)
	}
	return pos[""]
}

// parentPath strips the last ".key" or "[i]" from path.
func parentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

// joinKey appends a mapping key to a YAML path.
func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// joinIndex appends a sequence index to a YAML path.
func joinIndex(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}
