package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/redis"
)

const stateUsage = `usage: osb-gateway state <command> [flags]

commands:
  status [-config FILE]
                   say whether the state store still holds the gateway's
                   data (Redis: its epoch marker); exit 1 when it lost them
  accept-loss [-config FILE] [-import FILE]... [-replace]
                   after Redis lost the gateway's state (restarted without
                   persistence, or flushed), the gateways refuse every call
                   that needs it (mutating calls get 503): store the
                   inventory lines of each -import FILE first, as inventory
                   import does (- : standard input), then accept the loss,
                   and every gateway serves again on what the store holds

What was lost stays lost: the locks of operations in progress, the orphans
queued for mitigation, the inventory records not imported again. Restore
what can be restored before accepting (docs/state.md, "When Redis loses its
data"): the latest inventory export, lines written from what the platform
or the brokers hold.

exit codes: 0 done (status: the store holds its data), 1 failed (the store,
a file; status: the store lost its data), 2 usage or an unreadable
configuration file.
`

// stateTimeout bounds what a state command asks of the store (an import
// of many lines has its own context).
const stateTimeout = 10 * time.Second

// runState runs "osb-gateway state status|accept-loss" and returns the
// exit code.
func runState(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, stateUsage)
		return exitUsage
	}
	switch args[0] {
	case "status":
		return runStateStatus(args[1:], stdout, stderr)
	case "accept-loss":
		return runAcceptLoss(args[1:], stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, stateUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "osb-gateway state: unknown command %q\n\n%s", args[0], stateUsage)
	return exitUsage
}

// openRecovery opens the Redis of cfg without the epoch check
// (redis.OpenUnchecked) and checks that it answers; for another backend it
// says why there is nothing to do.
func openRecovery(ctx context.Context, cfg *config.Config) (store.Store, error) {
	switch cfg.State.Backend {
	case store.BackendRedis:
	case store.BackendMemory:
		return nil, errors.New("state.backend is memory: the state lives and ends with the gateway's process; there is no store to look at")
	default:
		return nil, fmt.Errorf("state.backend is %s, which keeps its data through a restart (what was committed is on disk): "+
			"only a Redis can lose the gateway's state without the gateway failing", cfg.State.Backend)
	}
	st, err := redis.OpenUnchecked(storeConfig(cfg.State).WithDefaults().Redis, time.Now)
	if err != nil {
		return nil, fmt.Errorf("state (redis): %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, stateTimeout)
	defer cancel()
	if err := st.Ping(pctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("state (redis) does not answer: %w", err)
	}
	return st, nil
}

// runStateStatus prints the store's epoch marker.
func runStateStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("state status", "state status [-config FILE]\n\n"+
		"Says whether the state store still holds the gateway's data (see osb-gateway state -h).", stderr)
	path := fs.String("config", "gateway.yaml", "the configuration `file` naming the state store")
	if code, ok := parseFlags(fs, args, false); !ok {
		return code
	}
	cfg, code, ok := loadForInventory(*path, "state status", stderr)
	if !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	st, err := openRecovery(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway state status: %v\n", err)
		return exitFailed
	}
	defer st.Close()
	e, err := redis.ReadEpoch(ctx, st)
	switch {
	case errors.Is(err, store.ErrLost):
		fmt.Fprintf(stdout, "state: redis: %v\nthe gateways refuse to work on it: restore what can be restored, then run osb-gateway state accept-loss\n", err)
		return exitFailed
	case err != nil:
		fmt.Fprintf(stderr, "osb-gateway state status: %v\n", err)
		return exitFailed
	case e.State == redis.EpochLost:
		fmt.Fprintf(stdout, "state: redis: %s: Redis restarted without persistence or was flushed, and the gateways refuse "+
			"to work on it: restore what can be restored, then run osb-gateway state accept-loss\n", e)
		return exitFailed
	case e.State == "":
		fmt.Fprintf(stdout, "state: redis: no epoch marker: no gateway has used this Redis under the prefix %q yet "+
			"(the first one to connect takes it for a new store)\n", storeConfig(cfg.State).WithDefaults().Redis.KeyPrefix)
		return exitOK
	}
	fmt.Fprintf(stdout, "state: redis: %s; it holds the gateway's data\n", e)
	return exitOK
}

// runAcceptLoss imports the -import files into a Redis that lost the
// gateway's state, then accepts the loss.
func runAcceptLoss(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("state accept-loss", "state accept-loss [-config FILE] [-import FILE]... [-replace]\n\n"+
		"Stores the inventory lines of each -import FILE in a Redis that lost the gateway's state, then accepts the\n"+
		"loss: the gateways serve again (see osb-gateway state -h).", stderr)
	path := fs.String("config", "gateway.yaml", "the configuration `file` naming the state store and the brokers")
	var imports fileList
	fs.Var(&imports, "import", "an inventory `file` of JSON lines to store before accepting, as inventory import reads it "+
		"(- : standard input); may be repeated")
	replace := fs.Bool("replace", false, "overwrite records already stored (without it they are kept and counted as skipped)")
	if code, ok := parseFlags(fs, args, false); !ok {
		return code
	}
	cfg, code, ok := loadForInventory(*path, "state accept-loss", stderr)
	if !ok {
		return code
	}
	ctx := context.Background()
	st, err := openRecovery(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway state accept-loss: %v\n", err)
		return exitFailed
	}
	defer st.Close()
	rctx, cancel := context.WithTimeout(ctx, stateTimeout)
	e, err := redis.ReadEpoch(rctx, st)
	cancel()
	if err == nil && (e.State == redis.EpochNew || e.State == redis.EpochAccepted) {
		fmt.Fprintf(stderr, "osb-gateway state accept-loss: nothing to accept: state: redis: %s; it holds the gateway's data\n", e)
		return exitFailed
	}
	for _, name := range imports {
		if code := importInto(ctx, st, cfg, name, *replace, stdin, stdout, stderr); code != exitOK {
			fmt.Fprintf(stderr, "osb-gateway state accept-loss: the loss is not accepted; the gateways still refuse\n")
			return code
		}
	}
	actx, cancel := context.WithTimeout(ctx, stateTimeout)
	defer cancel()
	was, now, err := redis.AcceptLoss(actx, st)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway state accept-loss: %v\n", err)
		return exitFailed
	}
	what := "no marker"
	if was.State != "" {
		what = was.String()
	}
	fmt.Fprintf(stdout, "accepted the loss (was: %s); now %s: the gateways serve again from their next connection\n", what, now)
	return exitOK
}

// importInto stores the inventory lines of name (- : stdin) in st, and
// says what it stored.
func importInto(ctx context.Context, st store.Store, cfg *config.Config, name string, replace bool,
	stdin io.Reader, stdout, stderr io.Writer) int {
	in := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "osb-gateway state accept-loss: %v\n", err)
			return exitFailed
		}
		defer f.Close()
		in = f
	} else {
		name = "standard input"
	}
	imp := &importer{cfg: cfg, replace: replace, st: st}
	if err := imp.run(ctx, in); err != nil {
		fmt.Fprintf(stderr, "osb-gateway state accept-loss: -import %s: %v\n", name, err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "imported %s: %s and %s read; %d written, %d skipped\n", name,
		plural(imp.instances, "instance"), plural(imp.bindings, "binding"), imp.res.Written, imp.res.Skipped)
	return exitOK
}

// fileList is a flag that may be repeated.
type fileList []string

func (l *fileList) String() string     { return strings.Join(*l, ",") }
func (l *fileList) Set(v string) error { *l = append(*l, v); return nil }
