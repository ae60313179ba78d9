package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// runCheck validates a configuration file and returns the exit code:
//
//	0  the file is valid; a summary goes to stdout
//	1  the file has problems; each goes to stderr on its own line, prefixed
//	   by the file name, followed by a count
//	2  bad flags, or the file cannot be read
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "gateway.yaml", "the configuration `file` to check")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: osb-gateway check [-config FILE]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "osb-gateway check: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}

	cfg, err := config.Load(*path)
	var probs *config.Problems
	switch {
	case errors.As(err, &probs):
		for _, p := range probs.List {
			fmt.Fprintf(stderr, "%s: %s\n", *path, p)
		}
		fmt.Fprintf(stderr, "%s: %s\n", *path, plural(probs.Len(), "problem"))
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "osb-gateway check: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "%s: valid (%s, %s, %s)\n", *path,
		plural(len(cfg.Tenants), "tenant"), plural(len(cfg.Brokers), "broker"), plural(cfg.RouteCount(), "route"))
	return 0
}

// plural formats n with noun, adding "s" unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
