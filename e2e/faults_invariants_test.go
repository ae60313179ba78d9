package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// The fault table's two promises, checked after every step and every
// mitigation of every row rather than by eye:
//
//   - nothing whose success reached the platform is deleted: every instance
//     and binding the platform was told it holds exists at the broker;
//   - nothing is left at a broker untracked: every instance and binding the
//     broker holds is named by the gateway's inventory, its orphan queue or
//     a lock of an operation in progress.

// held is what the platform was told it holds: the instances and bindings
// whose creation it got a success for (a 200 or 201 with a JSON object, or
// a poll that said "succeeded" after a 202) and whose deletion it did not.
type held struct {
	mu        sync.Mutex
	instances map[string]bool
	bindings  map[string]bool // "instance/binding"
	creating  map[string]bool // instances with a 202 to a provision
	deleting  map[string]bool // instances with a 202 to a deprovision
}

// tell records what the platform read of call c for instance id: the
// status and body the gateway sent, as the platform received them.
func (h *held) tell(c platformCall, id string, status int, body string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.instances == nil {
		h.instances, h.bindings = map[string]bool{}, map[string]bool{}
		h.creating, h.deleting = map[string]bool{}, map[string]bool{}
	}
	var answer struct {
		State *string `json:"state"`
	}
	object := json.Unmarshal([]byte(body), &answer) == nil && strings.HasPrefix(strings.TrimSpace(body), "{")
	switch c.endpoint {
	case samplebroker.EndpointProvision:
		switch {
		case (status == http.StatusOK || status == http.StatusCreated) && object:
			h.instances[id] = true
		case status == http.StatusAccepted && object:
			h.creating[id] = true
		}
	case samplebroker.EndpointDeprovision:
		switch status {
		case http.StatusOK, http.StatusGone:
			h.drop(id)
		case http.StatusAccepted, 0: // 0: no answer; the platform no longer counts on it
			h.deleting[id] = true
		}
	case samplebroker.EndpointInstanceLastOperation:
		if status == http.StatusGone && h.deleting[id] { // the deletion ended, as Cloud Controller reads it
			h.drop(id)
			delete(h.deleting, id)
			return
		}
		if status != http.StatusOK || answer.State == nil {
			return
		}
		switch *answer.State {
		case "succeeded":
			if h.creating[id] {
				h.instances[id] = true
			}
			if h.deleting[id] {
				h.drop(id)
			}
			delete(h.creating, id)
			delete(h.deleting, id)
		case "failed":
			delete(h.creating, id)
			delete(h.deleting, id)
		}
	case samplebroker.EndpointBind:
		if (status == http.StatusOK || status == http.StatusCreated) && object {
			h.bindings[id+"/k"] = true
		}
	case samplebroker.EndpointUnbind:
		if status == http.StatusOK || status == http.StatusGone {
			delete(h.bindings, id+"/k")
		}
	}
}

// drop forgets instance id and its bindings; h.mu is held.
func (h *held) drop(id string) {
	delete(h.instances, id)
	for b := range h.bindings {
		if strings.HasPrefix(b, id+"/") {
			delete(h.bindings, b)
		}
	}
}

func (h *held) snapshot() (instances, bindings []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.instances {
		if !h.deleting[id] { // a 202 to its deprovision: the platform no longer counts on it
			instances = append(instances, id)
		}
	}
	for b := range h.bindings {
		bindings = append(bindings, b)
	}
	slices.Sort(instances)
	slices.Sort(bindings)
	return instances, bindings
}

// violations lists every break of the two promises now, empty when both
// hold.
func (f *faultEnv) violations() ([]string, error) {
	at := f.broker.Holdings()
	var out []string
	instances, bindings := f.held.snapshot()
	for _, id := range instances {
		if !slices.Contains(at.Instances, id) {
			out = append(out, fmt.Sprintf("instance %s: the platform holds it, the broker does not", id))
		}
	}
	for _, b := range bindings {
		if !slices.Contains(at.Bindings, b) {
			out = append(out, fmt.Sprintf("binding %s: the platform holds it, the broker does not", b))
		}
	}
	tracked, err := f.tracked()
	if err != nil {
		return nil, err
	}
	for _, id := range at.Instances {
		if !tracked[id] {
			out = append(out, fmt.Sprintf("instance %s: at the broker, and neither the inventory, the orphan queue nor a lock names it", id))
		}
	}
	for _, b := range at.Bindings {
		if !tracked[b] {
			out = append(out, fmt.Sprintf("binding %s: at the broker, and neither the inventory, the orphan queue nor a lock names it", b))
		}
	}
	return out, nil
}

// tracked is every instance id and "instance/binding" the gateway names:
// in its inventory, its orphan queue or its locks.
func (f *faultEnv) tracked() (map[string]bool, error) {
	names := map[string]bool{}
	inv, err := f.inventory()
	if err != nil {
		return nil, err
	}
	for _, line := range inv {
		// "instance <id> <state>", "binding <id>/<binding> <state>"
		if kind, rest, ok := strings.Cut(line, " "); ok && (kind == "instance" || kind == "binding") {
			id, _, _ := strings.Cut(rest, " ")
			names[id] = true
		}
	}
	orphans, err := f.orphans()
	if err != nil {
		return nil, err
	}
	for _, o := range orphans {
		// "kind instance[/binding] decision"
		if fields := strings.Fields(o); len(fields) == 3 {
			names[fields[1]] = true
		}
	}
	locks, err := f.locks()
	if err != nil {
		return nil, err
	}
	for _, l := range locks {
		// "broker/instance[/binding] kind[ async]"
		key, _, _ := strings.Cut(l, " ")
		if _, id, ok := strings.Cut(key, "/"); ok {
			names[id] = true
		}
	}
	return names, nil
}
