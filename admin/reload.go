package admin

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// Reloaded is what POST /admin/reload answers after a reload that took.
type Reloaded struct {
	// Result is "success" (proxy.ReloadSuccess), as the result label of
	// osb_gateway_config_reload_total.
	Result string `json:"result"`
	// ConfigHash is the start of the SHA-256 of the configuration file now
	// in force, as the hash label of osb_gateway_config_info.
	ConfigHash string `json:"config_hash"`
	Tenants    int    `json:"tenants"`
	Brokers    int    `json:"brokers"`
}

// mountReload adds the reload route when Options.Reload is set:
//
//	POST /admin/reload  read the configuration file (and the password files it names) again and swap it in, as SIGHUP and the file watch do
//
// A file with problems is refused with 422 and every problem in the
// description (with its line, never a secret's value); the running
// configuration stays. Any other failure is a 500 whose cause is logged.
func (a *Admin) mountReload() {
	reload := a.reload
	if reload == nil {
		return
	}
	a.handle("POST /admin/reload", func(r *http.Request, _ *proxy.View) (any, string, error) {
		res, err := reload(r.Context())
		if err != nil {
			return nil, "", reloadError(err)
		}
		return res, fmt.Sprintf("reloaded the configuration %s", res.ConfigHash), nil
	})
}

// reloadError is the answer to a refused reload: a file that cannot be read
// or holds problems is the operator's to fix and is described; anything
// else is internal.
func reloadError(err error) error {
	var probs *config.Problems
	var pe *fs.PathError
	if errors.As(err, &probs) || errors.As(err, &pe) {
		return &osb.Error{Status: http.StatusUnprocessableEntity, Description: fmt.Sprintf(
			"the configuration was refused and the running configuration stays; expected a file that loads, got: %v", err)}
	}
	return &osb.Error{Status: http.StatusInternalServerError, Err: err, Description: "the reload failed and the running configuration stays; the cause is in the gateway's log"}
}
