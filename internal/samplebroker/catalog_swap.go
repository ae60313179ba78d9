package samplebroker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// SetCatalog makes GET /v2/catalog answer doc, byte for byte, from now
// on: tests change the catalog under live instances with it (a plan
// removed, an id changed under a name) to see what a gateway makes of
// it. Only the advertised catalog changes: the broker's own logic keeps
// the fixed services and plans (a plan removed from doc can still be
// provisioned; a new id in doc cannot). doc must be a JSON object; the
// ETag (outside legacy mode) follows it. Safe for concurrent use with
// requests.
func (b *Broker) SetCatalog(doc []byte) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(doc, &probe); err != nil {
		return fmt.Errorf("samplebroker: catalog is not a JSON object: %w", err)
	}
	body := append([]byte(nil), doc...)
	c := &catalogResponse{body: body, length: []string{strconv.Itoa(len(body))}}
	if !b.opts.Legacy {
		sum := sha256.Sum256(body)
		c.etag = []string{`"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	b.catalog.Store(c)
	return nil
}

// ResetCatalog makes GET /v2/catalog answer the broker's own fixed
// catalog again (see SetCatalog).
func (b *Broker) ResetCatalog() {
	c := newCatalogResponse(b.opts.Legacy, !b.opts.NotRetrievable)
	b.catalog.Store(&c)
}
