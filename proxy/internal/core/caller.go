package core

import (
	"net/http"
	"net/netip"
	"strings"
)

// Who made a platform call, as the access log and the audit record name
// it: the connection's peer, the client a trusted proxy forwarded for, the
// tenant credential's username and the client certificate's subject. None
// of it is a secret, and none of it costs an allocation but the
// certificate subject (only on mTLS connections).

// Proxies are listen.trusted_proxies: the peers whose X-Forwarded-For is
// believed. nil: none.
type Proxies []netip.Prefix

// Trusts reports whether a is one of p.
func (p Proxies) Trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, pr := range p {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// HeaderForwardedFor is X-Forwarded-For in its canonical form.
const HeaderForwardedFor = "X-Forwarded-For"

// PeerAddr returns the IP address of r's peer (RemoteAddr without its
// port, IPv6 without brackets), a substring of RemoteAddr.
func PeerAddr(remote string) string {
	i := strings.LastIndexByte(remote, ':')
	if i < 0 || strings.IndexByte(remote[i:], ']') >= 0 {
		return remote // no port
	}
	host := remote[:i]
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	return host
}

// ForwardedFor returns the client address r's X-Forwarded-For names when
// r's peer is one of p: walking the header from the right (the entry the
// nearest proxy added) the first address that is not itself a trusted
// proxy, or the leftmost when all are. It returns "" when the peer is not
// trusted, there is no header, or an entry that is not an IP address comes
// first (what lies left of it cannot be believed). The result is a
// substring of the header (an entry's port dropped), so it costs nothing.
func (p Proxies) ForwardedFor(r *http.Request) string {
	if len(p) == 0 {
		return ""
	}
	values := r.Header[HeaderForwardedFor]
	if len(values) == 0 {
		return ""
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !p.Trusts(peer.Addr()) {
		return ""
	}
	last := ""
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for v != "" {
			entry := v
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				entry, v = v[j+1:], v[:j]
			} else {
				v = ""
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			s, a, ok := parseForwarded(entry)
			if !ok {
				return ""
			}
			if !p.Trusts(a) {
				return s
			}
			last = s
		}
	}
	return last
}

// parseForwarded parses one X-Forwarded-For entry: an IP address, or one
// with a port ("192.0.2.1:4711", "[2001:db8::1]:4711", as some proxies
// write). It returns the address's text within entry.
func parseForwarded(entry string) (string, netip.Addr, bool) {
	if a, err := netip.ParseAddr(entry); err == nil && a.Zone() == "" {
		return entry, a, true
	}
	ap, err := netip.ParseAddrPort(entry)
	if err != nil || ap.Addr().Zone() != "" {
		return "", netip.Addr{}, false
	}
	return PeerAddr(entry), ap.Addr(), true
}

// ClientCertSubject returns the subject of r's verified client certificate
// (mTLS), "" when there is none.
func ClientCertSubject(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || len(r.TLS.VerifiedChains) == 0 {
		return ""
	}
	return r.TLS.PeerCertificates[0].Subject.String()
}
