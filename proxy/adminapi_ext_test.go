package proxy_test

import (
	"log/slog"
	"net/http"

	"github.com/osb-gateway/osb-gateway/admin"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// The admin API, for the tests of package proxy (see NewAdminForTest).
func init() {
	proxy.NewAdminForTest = func(sw *proxy.Switch, log *slog.Logger, ready func() error) http.Handler {
		return admin.New(proxy.NewView(sw), admin.Options{Ready: ready, Log: log})
	}
}
