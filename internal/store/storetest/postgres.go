package storetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// A real PostgreSQL server for the tests of the postgres backend: initdb
// in a temporary directory, then postgres on a free loopback port with
// its socket in that directory, durability off (fsync, synchronous
// commit: a test's data need not survive the machine). PostgreSQL refuses
// to run as root: a test running as root runs initdb and postgres as the
// user nobody. Tests skip, never fail, where PostgreSQL is not installed
// (Debian package postgresql).

// Postgres is one PostgreSQL server on a loopback port, owned by a test.
// Stop and Start take it down and up again on the same port and data
// directory. A Postgres is used from one goroutine.
type Postgres struct {
	// Addr is the server's "127.0.0.1:port"; Stop and Start keep it.
	Addr string

	tb   testing.TB
	bin  string // the directory of initdb and postgres
	dir  string // data in dir/data, the socket in dir
	port string
	cred *syscall.Credential // nobody's, when running as root
	cmd  *exec.Cmd
	done chan struct{}
	out  *osbtest.Buffer
}

// StartPostgres initialises a database cluster for tb, starts it on a
// free loopback port, waits until it accepts connections, and stops it
// when the test ends. It skips tb if PostgreSQL is not installed.
func StartPostgres(tb testing.TB) *Postgres {
	tb.Helper()
	bin := osbtest.PostgresBin()
	if bin == "" {
		tb.Skip("PostgreSQL is not installed (no initdb and postgres in /usr/lib/postgresql/*/bin or on PATH); " +
			"install it (Debian: apt-get install -y postgresql) to run the PostgreSQL tests")
	}
	p := &Postgres{tb: tb, bin: bin, port: freePort(tb)}
	p.Addr = net.JoinHostPort("127.0.0.1", p.port)
	// Not tb.TempDir: its parents are private to root, and nobody must
	// reach the directory.
	dir, err := os.MkdirTemp("", "storetest-postgres-")
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	p.dir = dir
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		p.cred = nobody(tb)
		if err := os.Chown(dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			tb.Fatalf("storetest: give %s to nobody: %v", dir, err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	tb.Cleanup(p.kill)
	out := &osbtest.Buffer{}
	initdb := p.command("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Stdout, initdb.Stderr = out, out
	if err := initdb.Run(); err != nil {
		tb.Fatalf("storetest: initdb: %v\n%s", err, out)
	}
	p.Start()
	return p
}

// nobody returns the credential of the user nobody (and its group).
func nobody(tb testing.TB) *syscall.Credential {
	u, err := user.Lookup("nobody")
	if err != nil {
		tb.Skipf("storetest: PostgreSQL refuses to run as root and there is no user nobody: %v", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
}

// command is a command of PostgreSQL's, run as nobody when root.
func (p *Postgres) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
		cmd.Env = append(os.Environ(), "HOME="+p.dir)
	}
	return cmd
}

// Start starts the server (again, after Stop) and waits until it accepts
// connections.
func (p *Postgres) Start() {
	p.tb.Helper()
	if p.cmd != nil {
		p.tb.Fatalf("storetest: postgres on %s is already running", p.Addr)
	}
	p.out = &osbtest.Buffer{}
	cmd := p.command("postgres", "-D", filepath.Join(p.dir, "data"), "-k", p.dir, "-p", p.port,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=32MB")
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		p.tb.Fatalf("storetest: start postgres: %v", err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(p.done)
	deadline := time.Now().Add(startTimeout)
	for {
		err := p.exec(context.Background(), "SELECT 1")
		if err == nil {
			return
		}
		select {
		case <-p.done:
			p.cmd = nil
			p.tb.Fatalf("storetest: postgres on %s exited at start:\n%s", p.Addr, p.out)
		default:
		}
		if time.Now().After(deadline) {
			p.tb.Fatalf("storetest: postgres on %s does not accept connections after %s (%v):\n%s", p.Addr, startTimeout, err, p.out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop shuts the server down (fast shutdown: SIGINT) and waits until it
// has exited.
func (p *Postgres) Stop() {
	p.tb.Helper()
	if p.cmd == nil {
		p.tb.Fatalf("storetest: postgres on %s is not running", p.Addr)
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(startTimeout):
		p.tb.Fatalf("storetest: postgres on %s still running after SIGINT:\n%s", p.Addr, p.out)
	}
	p.cmd = nil
}

// Pause freezes the server and every backend (SIGSTOP to the postmaster,
// then to its children, each of which is a session of its own):
// connections stay open but nothing is answered, as with a hung server or
// a network partition. Resume undoes it; a paused server is resumed when
// the test ends.
func (p *Postgres) Pause() {
	p.tb.Helper()
	if p.cmd == nil {
		p.tb.Fatalf("storetest: postgres on %s is not running", p.Addr)
	}
	pid := p.cmd.Process.Pid
	p.tb.Cleanup(func() { signalTree(pid, syscall.SIGCONT) })
	signalTree(pid, syscall.SIGSTOP)
	// A signal takes effect when its process next runs: wait until every
	// one shows as stopped.
	deadline := time.Now().Add(startTimeout)
	for !treeStopped(pid) {
		if time.Now().After(deadline) {
			p.tb.Fatalf("storetest: postgres on %s not stopped after SIGSTOP", p.Addr)
		}
		time.Sleep(time.Millisecond)
	}
}

// Resume lets a paused server run again (SIGCONT).
func (p *Postgres) Resume() {
	p.tb.Helper()
	if p.cmd == nil {
		p.tb.Fatalf("storetest: postgres on %s is not running", p.Addr)
	}
	signalTree(p.cmd.Process.Pid, syscall.SIGCONT)
}

// signalTree sends sig to pid, then to its children.
func signalTree(pid int, sig syscall.Signal) {
	_ = syscall.Kill(pid, sig)
	for _, c := range osbtest.Children(pid) {
		_ = syscall.Kill(c, sig)
	}
}

// treeStopped reports whether pid and its children are stopped (or gone).
func treeStopped(pid int) bool {
	for _, c := range append(osbtest.Children(pid), pid) {
		if !osbtest.Stopped(c) {
			return false
		}
	}
	return true
}

// kill ends a running server at the end of the test.
func (p *Postgres) kill() {
	if p.cmd == nil {
		return
	}
	signalTree(p.cmd.Process.Pid, syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown, children included
	select {
	case <-p.done:
	case <-time.After(startTimeout):
		signalTree(p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	p.cmd = nil
}

// URL is the connection URL of database postgres as the superuser, with
// more query parameters (k=v&…) if given.
func (p *Postgres) URL(params string) string {
	u := "postgres://postgres@" + p.Addr + "/postgres?sslmode=disable"
	if params != "" {
		u += "&" + params
	}
	return u
}

// exec runs sql on a connection of its own.
func (p *Postgres) exec(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL("connect_timeout=2"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// schemas makes the schema of each StoreConfig unique on a shared server.
var schemas atomic.Int64

// StoreConfig creates a schema of its own and returns a store.Config of
// the postgres backend whose URL puts it first on the search_path: a new,
// empty store on the shared server, as fast to make as a Redis key
// prefix. The timeouts are patient: a loaded machine may take a while.
func (p *Postgres) StoreConfig(tb testing.TB) store.Config {
	tb.Helper()
	name := fmt.Sprintf("test%d", schemas.Add(1))
	if err := p.exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		tb.Fatalf("storetest: create schema %s: %v", name, err)
	}
	return store.Config{Backend: store.BackendPostgres, Postgres: store.PostgresConfig{
		URL:      p.URL("search_path=" + name),
		MaxConns: 8, StatementTimeout: 30 * time.Second, ConnectTimeout: 10 * time.Second,
	}}
}
