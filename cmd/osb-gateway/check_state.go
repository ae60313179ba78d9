package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/postgres"
	"github.com/osb-gateway/osb-gateway/internal/store/redis"
)

// stateCheckTimeout bounds check's look at the state store.
const stateCheckTimeout = 10 * time.Second

// reportPostgres says, for state.backend postgres, whether the database
// answers and whether its schema is the one this gateway writes: one line
// on stdout, or a warning on stderr when it does not answer. It changes
// nothing (the schema is created by the gateway at start) and never fails
// the check: a database down during a rollout is the gateway's 503s to
// report, not a reason to keep the old version.
func reportPostgres(cfg *config.Config, path string, stdout, stderr io.Writer) {
	if cfg.State.Backend != store.BackendPostgres {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateCheckTimeout)
	defer cancel()
	st, err := postgres.Open(storeConfig(cfg.State).WithDefaults().Postgres, time.Now)
	if err != nil {
		fmt.Fprintf(stderr, "%s: warning: state: postgres: %v\n", path, err)
		return
	}
	defer st.Close()
	sc, err := postgres.Status(ctx, st)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "%s: warning: state: postgres does not answer (mutating calls get 503 until it does): %v\n", path, err)
	case sc.Version == 0:
		fmt.Fprintf(stdout, "%s: state: postgres answers; no schema yet: the gateway creates version %d at start\n", path, sc.Want)
	case sc.Version < sc.Want:
		fmt.Fprintf(stdout, "%s: state: postgres answers; schema version %d: the gateway migrates it to version %d at start\n", path, sc.Version, sc.Want)
	case sc.Version > sc.Want:
		fmt.Fprintf(stdout, "%s: state: postgres answers; schema version %d, newer than this gateway's %d (migrations only add: it works on it)\n", path, sc.Version, sc.Want)
	default:
		fmt.Fprintf(stdout, "%s: state: postgres answers; schema version %d, current\n", path, sc.Version)
	}
}

// reportRedis says, for state.backend redis, whether Redis answers and
// holds the gateway's data (its epoch marker, as state status reads it):
// one line on stdout, or a warning on stderr when it does not answer or
// lost the data. Like reportPostgres it changes nothing and never fails the
// check.
func reportRedis(cfg *config.Config, path string, stdout, stderr io.Writer) {
	if cfg.State.Backend != store.BackendRedis {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateCheckTimeout)
	defer cancel()
	st, err := openRecovery(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "%s: warning: %v (mutating calls get 503 until it answers)\n", path, err)
		return
	}
	defer st.Close()
	e, err := redis.ReadEpoch(ctx, st)
	switch {
	case errors.Is(err, store.ErrLost) || err == nil && e.State == redis.EpochLost:
		if err == nil {
			err = fmt.Errorf("%s", e)
		}
		fmt.Fprintf(stderr, "%s: warning: state: redis lost the gateway's data (%v): the gateways refuse every call that "+
			"needs it until an operator runs osb-gateway state accept-loss\n", path, err)
	case err != nil:
		fmt.Fprintf(stderr, "%s: warning: state: redis: %v\n", path, err)
	case e.State == "":
		fmt.Fprintf(stdout, "%s: state: redis answers; no epoch marker yet: the first gateway to connect creates one\n", path)
	default:
		fmt.Fprintf(stdout, "%s: state: redis answers; %s\n", path, e)
	}
}
