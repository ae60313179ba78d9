// Package storetest is the test support of internal/store: the contract
// suite every backend runs (Contract), its fixtures, the benchmarks'
// fillers, and a real redis-server and PostgreSQL (postgres.go) for tests
// of the store and of what is built on it. Tests using them skip, never
// fail, where they are not installed (Debian packages redis-server and
// postgresql).
package storetest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// startTimeout bounds how long a redis-server may take to answer PING, and
// to exit after SHUTDOWN.
const startTimeout = 10 * time.Second

// Redis is one redis-server on a loopback port, owned by a test. Stop and
// Start take it down and up again on the same port with the same data
// directory, keeping its data. A Redis is used from one goroutine.
type Redis struct {
	// Addr is the server's "127.0.0.1:port"; Stop and Start keep it.
	Addr string

	tb   testing.TB
	bin  string
	dir  string
	port string
	args []string // more redis-server arguments
	conf string   // a configuration file, the first argument ("": none)
	cmd  *exec.Cmd
	done chan struct{}   // closed when cmd has exited
	out  *osbtest.Buffer // the server's log, shown when it fails
}

// StartRedis starts a redis-server for tb on a free loopback port with an
// empty data directory, waits until it answers PING, and stops it when the
// test ends. It skips tb if redis-server is not on PATH.
func StartRedis(tb testing.TB) *Redis {
	tb.Helper()
	r := newRedis(tb)
	r.Start()
	return r
}

// newRedis prepares a Redis for tb without starting it.
func newRedis(tb testing.TB, args ...string) *Redis {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Skip("redis-server is not on PATH; install it (Debian: apt-get install -y redis-server) to run the Redis tests")
	}
	r := &Redis{tb: tb, bin: bin, dir: tb.TempDir(), port: freePort(tb), args: args}
	r.Addr = net.JoinHostPort("127.0.0.1", r.port)
	tb.Cleanup(r.kill)
	return r
}

// Start starts the server again after Stop, on the same port and data
// directory, and waits until it answers PING. It fails the test if the
// server is running or does not come up.
func (r *Redis) Start() {
	r.tb.Helper()
	if r.cmd != nil {
		r.tb.Fatalf("storetest: redis-server on %s is already running", r.Addr)
	}
	r.out = &osbtest.Buffer{}
	cmd := exec.Command(r.bin)
	if r.conf != "" {
		cmd.Args = append(cmd.Args, r.conf)
	}
	cmd.Args = append(cmd.Args,
		"--port", r.port, "--bind", "127.0.0.1",
		"--dir", r.dir, "--dbfilename", "dump.rdb",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "")
	cmd.Args = append(cmd.Args, r.args...)
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		r.tb.Fatalf("storetest: start redis-server: %v", err)
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(r.done)

	deadline := time.Now().Add(startTimeout)
	for {
		reply, err := r.command("PING")
		if err == nil && reply == "+PONG" {
			return
		}
		select {
		case <-r.done:
			r.cmd = nil
			r.tb.Fatalf("storetest: redis-server on %s exited at start:\n%s", r.Addr, r.out)
		default:
		}
		if time.Now().After(deadline) {
			r.tb.Fatalf("storetest: redis-server on %s does not answer PING after %s (last: %q, %v):\n%s",
				r.Addr, startTimeout, reply, err, r.out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Stop saves the data to the data directory and stops the server
// (SHUTDOWN SAVE), waiting until it has exited and its port is closed.
func (r *Redis) Stop() {
	r.tb.Helper()
	if r.cmd == nil {
		r.tb.Fatalf("storetest: redis-server on %s is not running", r.Addr)
	}
	reply, err := r.command("SHUTDOWN", "SAVE") // no reply on success: the server closes
	select {
	case <-r.done:
	case <-time.After(startTimeout):
		r.tb.Fatalf("storetest: redis-server on %s still running after SHUTDOWN (%q, %v):\n%s",
			r.Addr, reply, err, r.out)
	}
	r.cmd = nil
}

// RestartEmpty kills the server (SIGKILL, nothing saved), removes what an
// earlier Stop saved, and starts it again on the same port: it comes back
// empty, as a Redis without persistence does after a crash.
func (r *Redis) RestartEmpty() {
	r.tb.Helper()
	if r.cmd == nil {
		r.tb.Fatalf("storetest: redis-server on %s is not running", r.Addr)
	}
	r.kill()
	if err := os.Remove(filepath.Join(r.dir, "dump.rdb")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.tb.Fatalf("storetest: remove the saved data: %v", err)
	}
	r.Start()
}

// Pause freezes the server (SIGSTOP): connections stay open but nothing
// is answered, as with a hung server or a network partition. Resume undoes
// it; a paused server is resumed when the test ends.
func (r *Redis) Pause() {
	r.tb.Helper()
	r.signal(syscall.SIGSTOP)
}

// Resume lets a paused server run again (SIGCONT).
func (r *Redis) Resume() {
	r.tb.Helper()
	r.signal(syscall.SIGCONT)
}

func (r *Redis) signal(sig syscall.Signal) {
	r.tb.Helper()
	if r.cmd == nil {
		r.tb.Fatalf("storetest: redis-server on %s is not running", r.Addr)
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.tb.Fatalf("storetest: signal redis-server: %v", err)
	}
}

// kill ends a running server without saving, at the end of the test.
func (r *Redis) kill() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// command sends one command in RESP and returns the reply: a bulk
// string's content, else its first line ("" if the server closed the
// connection without one).
func (r *Redis) command(args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", r.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(startTimeout))
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(req.String())); err != nil {
		return "", err
	}
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if line == "" && err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if n, err := strconv.Atoi(strings.TrimPrefix(line, "$")); strings.HasPrefix(line, "$") && err == nil && n >= 0 {
		bulk := make([]byte, n+2)
		if _, err := io.ReadFull(br, bulk); err != nil {
			return "", err
		}
		return string(bulk[:n]), nil
	}
	return line, nil
}

// freePort returns a loopback TCP port nobody listens on right now.
func freePort(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("storetest: find a free port: %v", err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
