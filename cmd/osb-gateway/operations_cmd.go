package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

const operationsUsage = `usage: osb-gateway operations <command> [flags]

commands:
  list [-broker B] [-tenant T]
                   the locks and async operations, with age, operation and who started them
  reconcile [-state succeeded|failed -description TEXT [-release]] [-force] BROKER INSTANCE [BINDING]
                   without -state: the gateway polls the broker's last_operation with the
                   lock's operation and settles the lock by the answer; with -state: the
                   platform's next poll reads that state (and the lock is released then,
                   or at once with -release); -state is required to force, there is no
                   default. An operation released earlier (no lock, its record unknown)
                   is polled the same way, and the outcome recorded
  release -reason TEXT BROKER INSTANCE [BINDING]
                   release the lock at once (the broker is not asked); the inventory
                   records the operation's outcome as unknown (usage leaves out a
                   provision or bind of unknown outcome) until a reconcile settles it

Every command calls a running gateway's admin API (admin.address, with
admin.token): the flags -config (default gateway.yaml, read for both),
-addr and -token-file (each overriding the file's) and -operator (who you
are, for the audit record; default $USER) go before the arguments.

exit codes: 0 done, 1 the gateway refused or could not be reached (its
answer on standard error), 2 usage or an unreadable configuration file.
`

// operationsTimeout bounds one admin call (a reconcile waits for the
// broker's answer, within its timeout).
const operationsTimeout = 2 * time.Minute

// adminClient calls a running gateway's admin API.
type adminClient struct {
	base, token, operator string
	http                  *http.Client
}

// runOperations runs "osb-gateway operations list|reconcile|release" and
// returns the exit code.
func runOperations(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, operationsUsage)
		return exitUsage
	}
	switch args[0] {
	case "list", "reconcile", "release":
	case "help", "-h", "--help":
		fmt.Fprint(stdout, operationsUsage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "osb-gateway operations: unknown command %q\n\n%s", args[0], operationsUsage)
		return exitUsage
	}
	cmd := args[0]
	fs := newFlagSet("operations "+cmd, "operations "+cmd+" [flags] ...\n\nSee osb-gateway operations -h.", stderr)
	path := fs.String("config", "gateway.yaml", "the configuration `file` naming admin.address and admin.token")
	addr := fs.String("addr", "", "the admin listener, host:port (default: the file's admin.address)")
	tokenFile := fs.String("token-file", "", "a `file` holding the admin token (default: the file's admin.token)")
	who := fs.String("operator", os.Getenv("USER"), "who you are: the audit record names you")
	broker := fs.String("broker", "", "list: only this broker's locks")
	tenant := fs.String("tenant", "", "list: only this tenant's locks")
	st := fs.String("state", "", "reconcile: force this final state, succeeded or failed")
	desc := fs.String("description", "", "reconcile: the forced state's description, which the platform reads")
	release := fs.Bool("release", false, "reconcile: with -state, release the lock at once")
	force := fs.Bool("force", false, "reconcile: act on a lock that is no async operation (a call in flight)")
	reason := fs.String("reason", "", "release: why (required; logged and audited)")
	if code, ok := parseFlags(fs, args[1:], true); !ok {
		return code
	}
	c, err := newAdminClient(*path, *addr, *tokenFile, *who, flagGiven(fs, "config"))
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway operations %s: %v\n", cmd, err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), operationsTimeout)
	defer cancel()
	switch cmd {
	case "list":
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "osb-gateway operations list: unexpected arguments %q\n", fs.Args())
			return exitUsage
		}
		return c.list(ctx, *broker, *tenant, stdout, stderr)
	case "reconcile":
		p, ok := lockPath(fs, "reconcile", stderr)
		if !ok {
			return exitUsage
		}
		body := map[string]any{}
		if *st != "" {
			body["state"], body["description"], body["release"] = *st, *desc, *release
		}
		if *force {
			body["force"] = true
		}
		return c.do(ctx, http.MethodPost, p+"/reconcile", body, stdout, stderr)
	default:
		p, ok := lockPath(fs, "release", stderr)
		if !ok {
			return exitUsage
		}
		return c.do(ctx, http.MethodDelete, p+"?reason="+url.QueryEscape(*reason), nil, stdout, stderr)
	}
}

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// lockPath is /admin/operations/BROKER/INSTANCE[/BINDING] from fs's
// arguments.
func lockPath(fs *flag.FlagSet, cmd string, stderr io.Writer) (string, bool) {
	if fs.NArg() < 2 || fs.NArg() > 3 {
		fmt.Fprintf(stderr, "osb-gateway operations %s: expected BROKER INSTANCE [BINDING], got %d arguments\n", cmd, fs.NArg())
		return "", false
	}
	p := "/admin/operations"
	for _, a := range fs.Args() {
		p += "/" + url.PathEscape(a)
	}
	return p, true
}

// newAdminClient reads the admin listener and token from the file at
// path (when it exists or was named), overridden by addr and tokenFile.
func newAdminClient(path, addr, tokenFile, who string, named bool) (*adminClient, error) {
	var token string
	if _, err := os.Stat(path); err == nil || named {
		cfg, err := config.Load(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		token = cfg.Admin.Token.Reveal()
		if addr == "" {
			addr = cfg.Admin.Address
		}
	}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, err
		}
		token = strings.TrimSpace(string(b))
	}
	if addr == "" || addr == "off" {
		return nil, errors.New("no admin listener: expected -addr HOST:PORT or admin.address in the configuration file")
	}
	base, err := healthURL(addr, false) // loopback for an unspecified host
	if err != nil {
		return nil, fmt.Errorf("admin address %q: %w", addr, err)
	}
	return &adminClient{base: strings.TrimSuffix(base, "/healthz"), token: token, operator: who,
		http: &http.Client{Transport: &http.Transport{}}}, nil // no proxy from the environment: the admin listener is local
}

// call sends one admin request and returns its status and body.
func (c *adminClient) call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.operator != "" {
		req.Header.Set("X-Operator", c.operator)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	return res.StatusCode, b, err
}

// do sends one admin request and writes its JSON answer to stdout, or
// its error to stderr.
func (c *adminClient) do(ctx context.Context, method, path string, body any, stdout, stderr io.Writer) int {
	status, b, err := c.call(ctx, method, path, body)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway operations: %s %s: %v\n", method, c.base+path, err)
		return exitFailed
	}
	if status != http.StatusOK {
		fmt.Fprintf(stderr, "osb-gateway operations: %s %s answered %d: %s\n", method, path, status, bytes.TrimSpace(b))
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s\n", bytes.TrimSpace(b))
	return exitOK
}

// list writes the locks as a table: key, kind, async, age, operation,
// tenant, started by (the lock's tenant and its trace).
func (c *adminClient) list(ctx context.Context, broker, tenant string, stdout, stderr io.Writer) int {
	q := url.Values{}
	if broker != "" {
		q.Set("broker", broker)
	}
	if tenant != "" {
		q.Set("tenant", tenant)
	}
	path := "/admin/operations"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	status, b, err := c.call(ctx, http.MethodGet, path, nil)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway operations list: GET %s: %v\n", c.base+path, err)
		return exitFailed
	}
	if status != http.StatusOK {
		fmt.Fprintf(stderr, "osb-gateway operations list: GET %s answered %d: %s\n", path, status, bytes.TrimSpace(b))
		return exitFailed
	}
	var out struct {
		Operations []struct {
			Key        string  `json:"key"`
			Kind       string  `json:"kind"`
			Tenant     string  `json:"tenant"`
			Async      bool    `json:"async"`
			Operation  string  `json:"operation"`
			AgeSeconds float64 `json:"age_seconds"`
			Shim       *struct {
				State string `json:"state"`
			} `json:"shim"`
		} `json:"operations"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		fmt.Fprintf(stderr, "osb-gateway operations list: the answer is not the expected JSON: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%-50s %-12s %-6s %-10s %-16s %s\n", "LOCK", "KIND", "ASYNC", "AGE", "TENANT", "OPERATION")
	for _, o := range out.Operations {
		op := o.Operation
		if o.Shim != nil && o.Shim.State != "" {
			op += " (gateway: " + o.Shim.State + ")"
		}
		age := (time.Duration(o.AgeSeconds) * time.Second).String()
		fmt.Fprintf(stdout, "%-50s %-12s %-6t %-10s %-16s %s\n", o.Key, o.Kind, o.Async, age, o.Tenant, op)
	}
	fmt.Fprintf(stderr, "%s\n", plural(len(out.Operations), "operation"))
	return exitOK
}
