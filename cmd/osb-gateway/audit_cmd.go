package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/audit"
)

const auditUsage = `usage: osb-gateway audit <command> [flags] FILE...

commands:
  verify FILE...   check the hash chain of audit files, oldest first
                   (rotated files in number order, then the current one):
                   osb-gateway audit verify audit.log.* audit.log
  query [flags] [FILE...]
                   print the records that match every flag given:
    -file F          an audit file (repeatable; or name files as arguments)
    -instance ID     service instance id
    -tenant T        tenant name
    -broker B        broker name
    -status S        status (404) or class (4xx)
    -since T         records at or after T (RFC 3339)
    -until T         records before T (RFC 3339)

exit codes: 0 fine, 1 chain broken or file unreadable, 2 usage.
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
	fs := newFlagSet("audit verify", "audit verify FILE...\n\n"+
		"Checks the hash chain of audit files, oldest first: osb-gateway audit verify audit.log.* audit.log", stderr)
	if code, ok := parseFlags(fs, args, true); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, "osb-gateway audit verify: no files given\n\n"+auditUsage)
		return 2
	}
	sum, err := audit.Verify(fs.Args()...)
	var broken *audit.BrokenError
	switch {
	case errors.As(err, &broken):
		fmt.Fprintf(stderr, "osb-gateway audit verify: chain broken at %s:%d: %s (%d records before it are intact)\n",
			broken.File, broken.Line, broken.Problem, sum.Records)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "osb-gateway audit verify: %v\n", err)
		return 1
	}
	start := "from the first record of the chain"
	if !sum.Anchored {
		start = "starting after records not given (rotated away?)"
	}
	fmt.Fprintf(stdout, "ok: %d records in %d files, chain intact %s; last hash %s\n", sum.Records, sum.Files, start, sum.Last)
	return 0
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
