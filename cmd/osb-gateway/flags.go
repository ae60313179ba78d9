package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// newFlagSet returns a flag set for "osb-gateway name" whose usage is
// synopsis followed by the flags, written to stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: osb-gateway %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs and refuses positional arguments unless
// positional is set. ok is false when the command should return code at
// once: 0 after -h (the usage went to the flag set's output), exitUsage
// after a bad flag or argument.
func parseFlags(fs *flag.FlagSet, args []string, positional bool) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if !positional && fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "osb-gateway %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage, false
	}
	return exitOK, true
}

// loadExitCode is the exit code for a configuration that did not load:
// exitFailed when the file has problems, exitUsage when it cannot be read
// at all (the same from check and serve).
func loadExitCode(err error) int {
	var probs *config.Problems
	if errors.As(err, &probs) {
		return exitFailed
	}
	return exitUsage
}
