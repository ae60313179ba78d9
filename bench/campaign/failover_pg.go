package main

// -store postgres -store-failover: two PostgreSQL servers, a primary and
// a streaming standby made with pg_basebackup -R, the standby synchronous
// (synchronous_standby_names '*', synchronous_commit on, on both servers,
// so that a promoted standby keeps the setting). The gateways are given
// both servers' fronts in one URL with target_session_attrs=read-write,
// and their connections pass through the store link the other store
// faults degrade. The failover fault kills the primary, promotes the
// standby and makes the old primary the new standby with a fresh
// pg_basebackup (the campaign's database is small: a second or two).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// pgSettings are both servers' settings: durability off as in
// postgres.go (a kill -9 is no machine crash), replication on.
var pgSettings = []string{"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200",
	"-c", "shared_buffers=32MB", "-c", "wal_level=replica", "-c", "max_wal_senders=8", "-c", "hot_standby=on",
	"-c", "synchronous_commit=on", "-c", "synchronous_standby_names=*", "-c", "wal_receiver_status_interval=1s"}

// pgServer is one of the two servers and the front it is known by.
type pgServer struct {
	pgProc
	front *front
}

// pgFailover is the store of -store postgres -store-failover.
type pgFailover struct {
	mu      sync.Mutex // one fault at a time; primary
	c       *cluster
	bin     string
	servers [2]*pgServer
	primary int
}

// startPgFailover starts the primary and its synchronous standby; c.storeLink
// becomes the gateways' link to either server and c.postgres the
// primary. It returns what has started even with an error, for stop.
func startPgFailover(c *cluster, dir string) (*pgFailover, error) {
	bin := osbtest.PostgresBin()
	if bin == "" {
		return nil, errors.New("PostgreSQL is not installed: no initdb and postgres in /usr/lib/postgresql/*/bin or on PATH (Debian: apt-get install -y postgresql)")
	}
	p := &pgFailover{c: c, bin: bin}
	var err error
	if c.storeLink, err = newLink("link to postgres", "127.0.0.1:1"); err != nil {
		return p, err
	}
	for i, name := range []string{"postgres-a", "postgres-b"} {
		s := &pgServer{pgProc: pgProc{proc: proc{name: name}, addr: freeAddr()}}
		p.servers[i] = s
		if err := s.prepare(dir); err != nil {
			return p, err
		}
		if s.front, err = newFront(s.addr, func(net.IP) *link { return c.storeLink }); err != nil {
			return p, err
		}
	}
	a, b := p.servers[0], p.servers[1]
	initdb := a.command(filepath.Join(bin, "initdb"), "-D", filepath.Join(a.data, "data"), "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Stdout, initdb.Stderr = a.log, a.log
	if err := initdb.Run(); err != nil {
		return p, fmt.Errorf("initdb: %w; see %s", err, a.log.Name())
	}
	if err := a.run(bin); err != nil {
		return p, err
	}
	c.postgres = &a.pgProc
	if err := b.standbyOf(bin, a); err != nil {
		return p, err
	}
	return p, p.synced(a)
}

// prepare makes the server's directory (not under dir: PostgreSQL runs as
// nobody when the campaign is root, as postgres.go says) and its log.
func (s *pgServer) prepare(dir string) error {
	var err error
	if s.data, err = os.MkdirTemp("", "osb-campaign-"+s.name+"-"); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return fmt.Errorf("PostgreSQL refuses to run as root and there is no user nobody: %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		if err := os.Chown(s.data, int(uid), int(gid)); err != nil {
			return err
		}
	}
	s.log, err = os.Create(filepath.Join(dir, s.name+".log"))
	return err
}

// run starts postgres on the server's data directory and waits until it
// answers a query (a standby answers reads).
func (s *pgServer) run(bin string) error {
	args := append([]string{"-D", filepath.Join(s.data, "data"), "-k", s.data, "-p", portOf(s.addr)}, pgSettings...)
	cmd := s.command(filepath.Join(bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	err := waitReady(s.name, func() bool {
		var one int
		return !s.running() || s.query("SELECT 1", &one) == nil
	})
	if !s.running() {
		return fmt.Errorf("%s exited at start; see %s", s.name, s.log.Name())
	}
	if err == nil {
		s.up.Store(true)
	}
	return err
}

// query runs sql on the server itself (not through its front) and scans
// its one row into dst.
func (s *pgServer) query(sql string, dst ...any) error {
	return s.queryWithin(5*time.Second, sql, dst...)
}

// queryWithin is query with its own time limit.
func (s *pgServer) queryWithin(limit time.Duration, sql string, dst ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.url(s.addr))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dst...)
}

// standbyOf makes the server a new standby of primary: its data directory
// goes, pg_basebackup -R copies the primary's, and it starts.
func (s *pgServer) standbyOf(bin string, primary *pgServer) error {
	data := filepath.Join(s.data, "data")
	if err := os.RemoveAll(data); err != nil {
		return err
	}
	bb := s.command(filepath.Join(bin, "pg_basebackup"), "-D", data, "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-h", "127.0.0.1", "-p", portOf(primary.addr), "-U", "postgres")
	bb.Stdout, bb.Stderr = s.log, s.log
	if err := bb.Run(); err != nil {
		return fmt.Errorf("pg_basebackup of %s from %s: %w; see %s", s.name, primary.name, err, s.log.Name())
	}
	return s.run(bin)
}

// promote promotes the standby and waits until it is a primary. A
// promotion asked for is not taken back: when pg_promote's answer is lost
// (a loaded machine, its connection's time limit), whether the server
// left recovery decides, not the error.
func (s *pgServer) promote() error {
	var promoted bool
	err := s.queryWithin(time.Minute, "SELECT pg_promote(true, 50)", &promoted)
	if err == nil && promoted {
		return nil
	}
	if werr := waitFor(s.name+" to leave recovery after pg_promote", time.Minute, func() bool {
		var recovering bool
		return s.query("SELECT pg_is_in_recovery()", &recovering) == nil && !recovering
	}); werr != nil {
		return fmt.Errorf("pg_promote on %s: %v (promoted: %v), and %w", s.name, err, promoted, werr)
	}
	return nil
}

// synced waits until primary has a synchronous standby streaming.
func (p *pgFailover) synced(primary *pgServer) error {
	return waitFor(primary.name+" to have its synchronous standby", time.Minute, func() bool {
		var n int
		err := primary.query("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'sync'", &n)
		return err == nil && n > 0
	})
}

// crash kills the postmaster and every process it runs (kill -9, as a
// machine that dies), and checks they are gone and the port refuses.
func (s *pgProc) crash() (int, error) {
	kids := osbtest.Children(s.pid())
	pid, err := s.kill9()
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	if err != nil {
		return pid, err
	}
	if err := waitFor(fmt.Sprintf("the %d processes of %s's postmaster %d to end", len(kids), s.name, pid), 10*time.Second, func() bool {
		for _, k := range kids {
			if !osbtest.Stopped(k) { // a zombie counts as ended
				return false
			}
		}
		return true
	}); err != nil {
		return pid, err
	}
	return pid, gone(pid, s.addr)
}

// failover is the fault: the primary is killed (kill -9 of its
// postmaster and its processes, checked gone by PID and port), the
// standby promoted (pg_promote), and after f.For the old primary comes
// back as the new standby, a fresh pg_basebackup of the new primary. The
// new primary's commits wait for it meanwhile (synchronous_standby_names
// stays '*'); the fault ends once it streams as the synchronous standby.
func (p *pgFailover) failover(f *fault) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, next := p.servers[p.primary], p.servers[1-p.primary]
	defer lockServers(&p.servers[0].proc, &p.servers[1].proc)()
	f.Start = time.Now()
	pid, err := old.crash()
	f.PID = pid
	if err != nil {
		return err
	}
	if err := next.promote(); err != nil {
		return fmt.Errorf("%w; the old primary stays down", err)
	}
	p.primary = 1 - p.primary
	p.c.postgres = &next.pgProc
	f.Detail = next.name + " promoted"
	time.Sleep(f.For)
	// The new primary's commits wait for a standby: a rebuild that fails
	// (a loaded machine) is tried again rather than leave them waiting
	// for the rest of the run.
	var err2 error
	for range 3 {
		if err2 = old.standbyOf(p.bin, next); err2 == nil {
			break
		}
		old.stopIfRunning()
	}
	if err2 != nil {
		return err2
	}
	if f.NewPID = old.pid(); f.NewPID == pid {
		return fmt.Errorf("%s restarted as pid %d, killed pid %d", old.name, f.NewPID, pid)
	}
	return p.synced(next)
}

// pause stops the primary and its processes (SIGSTOP) for f.For: the
// postgres-sigstop fault, on whichever server is the primary, never during
// a failover.
func (p *pgFailover) pause(f *fault) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[p.primary]
	defer lockServers(&s.proc)()
	f.Start = time.Now()
	f.Detail = s.name
	err := s.pause()
	time.Sleep(f.For)
	return errors.Join(err, s.resume())
}

func (p *pgFailover) stop() {
	for _, s := range p.servers {
		if s != nil {
			s.stop()
		}
		if s != nil && s.front != nil {
			s.front.Close()
		}
	}
}

// pgFailoverURL is the gateways' URL: both fronts, the primary the one
// that takes writes.
func (p *pgFailover) url() string {
	return "postgres://postgres@" + p.servers[0].front.Addr() + "," + p.servers[1].front.Addr() +
		"/postgres?sslmode=disable&connect_timeout=2&target_session_attrs=read-write"
}

// stopIfRunning kills what a failed rebuild left running (a postgres that
// did not come up in time), so that the next rebuild starts clean.
func (s *pgServer) stopIfRunning() {
	if s.running() {
		_, _ = s.crash()
	}
}
