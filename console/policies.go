package console

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/proxy"
)

// policiesData is the policies page: every policy of the configuration
// and the latest calls they denied (or, in report mode, would have).
type policiesData struct {
	Policies []proxy.PolicyInfo
	Denials  []proxy.PolicyDenial
}

// policies fills the policies page (templates/policies.html).
func (c *Console) policies(r *http.Request, f *frame) (any, error) {
	return &policiesData{Policies: c.o.View.Policies(), Denials: c.o.View.PolicyDenials()}, nil
}
