package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy"
	"github.com/osb-gateway/osb-gateway/rules"
	gwtls "github.com/osb-gateway/osb-gateway/tls"
)

// runCheck validates a configuration file and returns the exit code:
//
//	0  the file is valid; a summary goes to stdout
//	1  the file has problems, or a certificate or key file it names does
//	   (unreadable, key mismatch, expired, names not covered); each goes to
//	   stderr on its own line, prefixed by the file name, followed by a
//	   count. Certificates ending within 30 days are warned about on
//	   stderr without failing.
//	2  bad flags, or the file cannot be read (as serve)
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", "check [-config FILE] [-offline]\n\n"+
		"Validates the file (every problem at once, each with its YAML path) and the certificate files it\n"+
		"names; without -offline also fetches and lints every broker's catalog, so every broker must answer.", stderr)
	path := fs.String("config", "gateway.yaml", "the configuration `file` to check")
	offline := fs.Bool("offline", false, "check the file only; do not fetch and lint the brokers' catalogs")
	if code, ok := parseFlags(fs, args, false); !ok {
		return code
	}

	cfg, err := config.Load(*path)
	var probs *config.Problems
	switch {
	case errors.As(err, &probs):
		for _, p := range probs.List {
			fmt.Fprintf(stderr, "%s: %s\n", *path, p)
		}
		fmt.Fprintf(stderr, "%s: %s\n", *path, plural(probs.Len(), "problem"))
		return exitFailed
	case err != nil:
		fmt.Fprintf(stderr, "osb-gateway check: %v\n", err)
		return exitUsage
	}
	for _, w := range config.Warnings(cfg) {
		fmt.Fprintf(stderr, "%s: warning: %s\n", *path, w)
	}
	if n := reportCertFiles(cfg, *path, stderr); n > 0 {
		fmt.Fprintf(stderr, "%s: %s\n", *path, plural(n, "certificate problem"))
		return exitFailed
	}
	if !*offline {
		reportPostgres(cfg, *path, stdout, stderr) // check_state.go: warnings only
		reportRedis(cfg, *path, stdout, stderr)
		if n := reportCatalogs(cfg, *path, stdout, stderr); n > 0 {
			fmt.Fprintf(stderr, "%s: %s in the brokers' catalogs\n", *path, plural(n, "error"))
			return exitFailed
		}
	}
	fmt.Fprintf(stdout, "%s: valid (%s, %s, %s)\n", *path,
		plural(len(cfg.Tenants), "tenant"), plural(len(cfg.Brokers), "broker"), plural(cfg.RouteCount(), "route"))
	return exitOK
}

// plural formats n with noun, adding "s" unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// reportCertFiles writes what gwtls.CheckFiles finds in the certificate
// and key files cfg names to w, one line each, and returns the number of
// errors (warnings are written but not counted).
func reportCertFiles(cfg *config.Config, path string, w io.Writer) int {
	errs := 0
	for _, f := range gwtls.CheckFiles(cfg, time.Now()) {
		fmt.Fprintf(w, "%s: %s\n", path, f)
		if f.Severity == gwtls.SeverityError {
			errs++
		}
	}
	return errs
}

// reportCatalogs fetches and lints every broker's catalog, writes each
// finding (JSON path, severity, message) to stderr and returns the number
// of errors: an unreachable broker, an invalid catalog, or a broker that
// refuses the version the gateway fetches at (Cloud Controller's, capped
// at the broker's maximum) counts as one. For each broker that answered,
// it warns of the versions of its api_version range the broker refuses
// (reportRefusedVersions).
func reportCatalogs(cfg *config.Config, path string, stdout, stderr io.Writer) int {
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", path, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := 0
	for i, cl := range g.LintCatalogs(ctx) {
		if cl.Err == nil || cl.Refused {
			reportRefusedVersions(ctx, g, cfg.Brokers[i], path, stderr)
		}
		if cl.Err != nil {
			fmt.Fprintf(stderr, "%s: broker %q: catalog not fetched: %s\n", path, cl.Broker, fetchCause(cl.Err))
			errs++
			continue
		}
		n := 0
		for _, f := range cl.Findings {
			fmt.Fprintf(stderr, "%s: broker %q catalog: %s\n", path, cl.Broker, f)
			if f.Severity == rules.SeverityError {
				n++
			}
		}
		errs += n
		fmt.Fprintf(stdout, "%s: broker %q: catalog at %s fetched, %s\n", path, cl.Broker, cl.Version, plural(len(cl.Findings), "finding"))
	}
	for _, p := range g.MigrationProblems(ctx) { // from the catalogs just fetched
		fmt.Fprintf(stderr, "%s: %s\n", path, p)
		errs++
	}
	for _, w := range g.QuotaWarnings(ctx) { // from the catalogs just fetched
		fmt.Fprintf(stderr, "%s: warning: %s\n", path, w)
	}
	reportDrift(ctx, cfg, g, path, stdout, stderr) // check_drift.go: warnings only
	return errs
}

// fetchCause is what went wrong in a failed catalog fetch, said once: the
// cache's 503 repeats its cause in its description and adds when the next
// fetch may start, which means nothing to check, so the cause wrapped in
// the innermost OSB error is given instead, or that error's description.
func fetchCause(err error) string {
	for {
		var oe *osb.Error
		if !errors.As(err, &oe) {
			return err.Error()
		}
		if oe.Err == nil {
			return oe.Description
		}
		err = oe.Err
	}
}
