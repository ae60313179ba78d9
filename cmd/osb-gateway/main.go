// Command osb-gateway is a reverse-proxy gateway in front of Open Service
// Broker API brokers.
//
//	osb-gateway [serve] [-config gateway.yaml]   run the gateway
//	osb-gateway demo [-addr 127.0.0.1:8080]      run a sample broker behind the gateway
//	osb-gateway check [-offline] [-config F]     validate a configuration file, lint the brokers' catalogs
//	osb-gateway health [-addr 127.0.0.1:9090]    ask a running gateway's admin listener whether it is healthy
//	osb-gateway hash-password [-cost 10]         bcrypt a password read from standard input
//	osb-gateway audit verify|query ...           check the audit log's hash chain, search it
//	osb-gateway inventory export|import ...      write the inventory as JSON lines, store JSON lines in it
//	osb-gateway operations list|reconcile|release ...  list, reconcile or release operation locks (admin API)
//	osb-gateway state status|accept-loss ...     whether Redis still holds the state; accept its loss
//	osb-gateway usage [-from T] [-to T] ...      the usage report (instance-hours, bindings) as CSV or JSON
//	osb-gateway schema                           print the JSON Schema of gateway.yaml
//	osb-gateway version                          print the version and build information
//
// Exit codes are the same for every command (see usage).
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// Exit codes, shared by every subcommand.
const (
	// exitOK: done; the file is valid; the gateway is healthy; serve
	// stopped on a signal with every request finished.
	exitOK = 0
	// exitFailed: the configuration (or a file, certificate or catalog it
	// names) has problems, the gateway could not start or failed while
	// serving, requests had to be cut at shutdown, the gateway is not
	// healthy, an audit chain is broken, an inventory export or import
	// failed.
	exitFailed = 1
	// exitUsage: an unknown command, bad flags or arguments, or a
	// configuration file that cannot be read at all.
	exitUsage = 2
)

const usage = `usage: osb-gateway <command> [flags]

commands:
  serve          run the gateway (the default): -config FILE (default gateway.yaml)
                 [-listen ADDR] [-admin ADDR] (in place of listen.address, admin.address)
  demo           run sample brokers behind the gateway on loopback: -addr HOST:PORT
  check          validate a configuration file; without -offline also fetch and lint
                 every broker's catalog (so every broker must answer): -config FILE [-offline]
  health         ask a running gateway's admin listener for /healthz (or /readyz with -ready);
                 for container health checks: -addr HOST:PORT (default 127.0.0.1:9090)
  hash-password  print the bcrypt hash of the password read from standard input: [-cost N]
  audit          check or search audit files: audit verify FILE..., audit query -file F [-instance ID]
                 [-tenant T] [-broker B] [-status 4xx] [-since T] [-until T]
  inventory      export or import the inventory as JSON lines (import adopts a broker's existing
                 instances): inventory export [-config F] [-o FILE], inventory import [-config F]
                 [-replace] [-dry-run] FILE|-; with state.backend bolt, stop the gateway first
  operations     list, reconcile or release a running gateway's operation locks through its admin API:
                 operations list, operations reconcile [-state S -description D] BROKER INSTANCE [BINDING],
                 operations release -reason R BROKER INSTANCE [BINDING]
  state          whether the state store still holds the gateway's data, and after Redis lost it,
                 restore the inventory and accept the loss: state status [-config F],
                 state accept-loss [-config F] [-import FILE]... [-replace]
  usage          the usage report of [from, to) per tenant, broker, service and plan: usage
                 [-config F] [-from T] [-to T] [-format csv|json] [-tenant T] [-broker B]
  policy         evaluate the policies against a recorded call and print each rule's verdict:
                 policy test -config F -request FILE (a request file or an audit record)
  schema         print the JSON Schema of gateway.yaml (for editors and the Helm chart)
  version        print the version, the VCS revision and the Go version it was built with

flags:
  -h, --help     print this help
  --version      print the version (as "version")

exit codes (every command):
  0  done: the file is valid, the gateway is healthy, serve stopped on a signal with every request finished
  1  failed: the configuration has problems, the gateway could not start or failed while serving,
     requests had to be cut at shutdown, the gateway is not healthy, an audit chain is broken,
     an inventory export or import failed (the state store, an entry, a file), the state store
     lost its data (state status)
  2  usage: unknown command, bad flags or arguments, or the configuration file cannot be read

Run "osb-gateway <command> -h" for a command's flags.
`

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help", "help":
			fmt.Fprint(stdout, usage)
			return exitOK
		case "-version", "--version":
			return runVersion(nil, stdout, stderr)
		}
	}
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return runServe(args, stderr)
	case "demo":
		return runDemo(args, stdout, stderr)
	case "check":
		return runCheck(args, stdout, stderr)
	case "health":
		return runHealth(args, stdout, stderr)
	case "hash-password":
		return runHashPassword(args, stdin, stdout, stderr)
	case "audit":
		return runAudit(args, stdout, stderr)
	case "inventory":
		return runInventory(args, stdin, stdout, stderr)
	case "operations":
		return runOperations(args, stdout, stderr)
	case "state":
		return runState(args, stdin, stdout, stderr)
	case "usage":
		return runUsage(args, stdout, stderr)
	case "policy":
		return runPolicy(args, stdout, stderr)
	case "schema":
		return runSchema(args, stdout, stderr)
	case "version":
		return runVersion(args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "osb-gateway: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}
