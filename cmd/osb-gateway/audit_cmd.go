package main

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"slices"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/audit"
)

const auditUsage = `usage: osb-gateway audit <command> [flags] FILE...

commands:
  verify [flags] FILE...
                   check the hash chain of audit files, oldest first
                   (rotated files in number order, then the current one),
                   and compare them with the head file beside the current
                   one (records cut off the end):
                   osb-gateway audit verify audit.log.* audit.log
    -key-file F      audit.hmac_key_file of a keyed chain (repeatable: old
                     and new keys)
    -head F          the head to compare with; default FILE.head of the
                     last FILE, when it exists (a logged head can be saved
                     to a file and given here)
  query [flags] [FILE...]
                   print the records that match every flag given:
    -file F          an audit file (repeatable; or name files as arguments)
    -instance ID     service instance id
    -tenant T        tenant name
    -broker B        broker name
    -status S        status (404) or class (4xx)
    -since T         records at or after T (RFC 3339)
    -until T         records before T (RFC 3339)

exit codes: 0 fine, 1 chain broken, files cut short or unreadable, 2 usage
(a keyed chain without -key-file included).
`

// runAudit runs "osb-gateway audit verify|query" and returns the exit
// code.
func runAudit(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, auditUsage)
		return 2
	}
	switch args[0] {
	case "verify":
		return runAuditVerify(args[1:], stdout, stderr)
	case "query":
		return runAuditQuery(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, auditUsage)
		return 0
	}
	fmt.Fprintf(stderr, "osb-gateway audit: unknown command %q\n\n%s", args[0], auditUsage)
	return 2
}

// runAuditVerify checks the chain and names the first broken record.
func runAuditVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("audit verify", "audit verify [flags] FILE...\n\n"+
		"Checks the hash chain of audit files, oldest first, and compares them with their head:\n"+
		"osb-gateway audit verify audit.log.* audit.log", stderr)
	var keyFiles []string
	var headFile string
	fs.Func("key-file", "`file` holding audit.hmac_key_file's key (repeatable)", func(s string) error {
		keyFiles = append(keyFiles, s)
		return nil
	})
	fs.StringVar(&headFile, "head", "", "head `file` to compare with (default: FILE.head of the last FILE, when it exists)")
	if code, ok := parseFlags(fs, args, true); !ok {
		return code
	}
	files, heads := splitHeads(fs.Args())
	if len(files) == 0 {
		fmt.Fprint(stderr, "osb-gateway audit verify: no files given\n\n"+auditUsage)
		return exitUsage
	}
	var o audit.VerifyOptions
	for _, f := range keyFiles {
		key, err := audit.LoadKey(f)
		if err != nil {
			fmt.Fprintf(stderr, "osb-gateway audit verify: -key-file %s: %v\n", f, err)
			return exitUsage
		}
		o.Keys = append(o.Keys, key)
	}
	explicit := headFile != ""
	if !explicit {
		headFile = audit.HeadPath(files[len(files)-1])
		switch {
		case slices.Contains(heads, headFile):
			explicit = true
		case len(heads) == 1:
			headFile, explicit = heads[0], true
		}
	}
	if h, err := audit.ReadHead(headFile); err == nil {
		o.Head = &h
	} else if explicit || !errors.Is(err, iofs.ErrNotExist) {
		fmt.Fprintf(stderr, "osb-gateway audit verify: head: %v\n", err)
		return exitUsage
	}
	sum, err := o.Verify(files...)
	var broken *audit.BrokenError
	var needKey *audit.KeyRequiredError
	var cut *audit.HeadMismatchError
	switch {
	case errors.As(err, &needKey):
		fmt.Fprintf(stderr, "osb-gateway audit verify: %v (%d records before it are intact)\n", err, sum.Records)
		return exitUsage
	case errors.As(err, &broken):
		fmt.Fprintf(stderr, "osb-gateway audit verify: chain broken at %s:%d: %s (%d records before it are intact)\n",
			broken.File, broken.Line, broken.Problem, sum.Records)
		return exitFailed
	case errors.As(err, &cut):
		fmt.Fprintf(stderr, "osb-gateway audit verify: %v; the chain in the files is intact, so records were removed from its end\n", err)
		return exitFailed
	case err != nil:
		fmt.Fprintf(stderr, "osb-gateway audit verify: %v\n", err)
		return exitFailed
	}
	start := "from the first record of the chain"
	if !sum.Anchored {
		start = "starting after records not given (rotated away?)"
	}
	fmt.Fprintf(stdout, "ok: %d records in %d files, chain intact %s; last hash %s\n", sum.Records, sum.Files, start, sum.Last)
	switch {
	case sum.Keyed > 0 && sum.Unkeyed > 0:
		fmt.Fprintf(stdout, "keyed: %d records with HMAC-SHA256, after %d plain ones (written before audit.hmac_key_file was set)\n", sum.Keyed, sum.Unkeyed)
	case sum.Keyed > 0:
		fmt.Fprintf(stdout, "keyed: all %d records with HMAC-SHA256\n", sum.Keyed)
	}
	if sum.Head != nil {
		fmt.Fprintf(stdout, "head: %s held %d records at %s, and still does\n", sum.Head.File, sum.Head.Records, sum.Head.Time.Format(time.RFC3339))
	} else {
		fmt.Fprintf(stdout, "head: none (%s not found): records cut off the end would go unnoticed; compare the last hash with a logged head\n", headFile)
	}
	return exitOK
}

// splitHeads separates head files (*.head, such as a glob audit.log.*
// catches) from audit files.
func splitHeads(args []string) (files, heads []string) {
	for _, a := range args {
		if strings.HasSuffix(a, ".head") {
			heads = append(heads, a)
		} else {
			files = append(files, a)
		}
	}
	return files, heads
}

// runAuditQuery prints the records that match the flags.
func runAuditQuery(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("audit query", "audit query [flags] [FILE...]\n\n"+
		"Prints the audit records that match every flag given.", stderr)
	var files []string
	var f audit.Filter
	fs.Func("file", "an audit file (repeatable)", func(s string) error { files = append(files, s); return nil })
	fs.StringVar(&f.InstanceID, "instance", "", "service instance id")
	fs.StringVar(&f.Tenant, "tenant", "", "tenant name")
	fs.StringVar(&f.Broker, "broker", "", "broker name")
	fs.StringVar(&f.Status, "status", "", "status (404) or class (4xx)")
	fs.Func("since", "records at or after this time (RFC 3339)", timeFlag(&f.Since))
	fs.Func("until", "records before this time (RFC 3339)", timeFlag(&f.Until))
	if code, ok := parseFlags(fs, args, true); !ok {
		return code
	}
	if err := audit.ParseStatus(f.Status); err != nil {
		fmt.Fprintf(stderr, "osb-gateway audit query: -%v\n", err)
		return 2
	}
	files = append(files, fs.Args()...)
	files, _ = splitHeads(files) // a glob's head file holds no records
	if len(files) == 0 {
		fmt.Fprint(stderr, "osb-gateway audit query: no files given (-file F)\n\n"+auditUsage)
		return 2
	}
	if _, err := audit.Query(stdout, f, files...); err != nil {
		fmt.Fprintf(stderr, "osb-gateway audit query: %v\n", err)
		return 1
	}
	return 0
}

// timeFlag parses an RFC 3339 flag value into *t.
func timeFlag(t *time.Time) func(string) error {
	return func(s string) error {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return fmt.Errorf("want an RFC 3339 time such as 2026-01-02T15:04:05Z")
		}
		*t = v
		return nil
	}
}
