package samplebroker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// The state file (Options.StateFile) is a journal of JSON lines. Each line
// holds one instance's whole record after a change, bindings included, or
// no record when the instance was removed; the last line of an id wins.
// A line also carries the operation counter, so that operation ids stay
// unique across restarts. A line is appended with one write(2) while the
// instance's shard is locked and before the response is written, so every
// answer the broker sent survives a crash of the process (kill -9; the
// file is not fsynced, so a crash of the machine may lose the tail).
//
// Open replays the file, ignores a torn final line (one without its
// newline: the write a crash cut short, whose answer was never sent),
// then compacts it: a fresh file with one line per instance is renamed
// over the old one.

// journalLine is one line of the state file. A line without an id carries
// the operation counter alone.
type journalLine struct {
	ID       string          `json:"id,omitempty"`
	OpSeq    uint64          `json:"op_seq"`
	Instance *instanceRecord `json:"instance,omitempty"` // nil: no record
}

// instanceRecord is an instance on disk.
type instanceRecord struct {
	Plan     string                    `json:"plan"`
	Org      string                    `json:"org,omitempty"`
	Space    string                    `json:"space,omitempty"`
	Params   json.RawMessage           `json:"params,omitempty"`
	Live     bool                      `json:"live,omitempty"`
	Deleted  bool                      `json:"deleted,omitempty"`
	Op       *operationRecord          `json:"op,omitempty"`
	Bindings map[string]*bindingRecord `json:"bindings,omitempty"`
}

// bindingRecord is a binding on disk.
type bindingRecord struct {
	AppGUID     string           `json:"app_guid,omitempty"`
	Params      json.RawMessage  `json:"params,omitempty"`
	Credentials json.RawMessage  `json:"credentials,omitempty"`
	Live        bool             `json:"live,omitempty"`
	Deleted     bool             `json:"deleted,omitempty"`
	Op          *operationRecord `json:"op,omitempty"`
}

// operationRecord is an asynchronous operation on disk. Due is absolute, so
// that a restarted broker finishes the operation on time.
type operationRecord struct {
	Kind    string          `json:"kind"`
	ID      string          `json:"id"`
	Due     time.Time       `json:"due"`
	Fail    bool            `json:"fail,omitempty"`
	Settled bool            `json:"settled,omitempty"`
	Plan    string          `json:"plan,omitempty"`   // an update's target plan
	Params  json.RawMessage `json:"params,omitempty"` // an update's target parameters
}

// journal appends to the state file.
type journal struct {
	mu   sync.Mutex
	f    *os.File // nil once closed
	path string
}

// errJournalClosed is what a change after Close gets.
var errJournalClosed = errors.New("the state file is closed")

// append writes one line with a single write call.
func (j *journal) append(line []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errJournalClosed
	}
	_, err := j.f.Write(line)
	return err
}

func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// persist journals the record of instanceID after a change; the caller
// holds its shard. Without a state file it does nothing.
func (b *Broker) persist(sh *shard, instanceID string) error {
	if b.journal == nil {
		return nil
	}
	return b.persistSlow(sh, instanceID)
}

func (b *Broker) persistSlow(sh *shard, instanceID string) error {
	line, err := encodeLine(journalLine{ID: instanceID, OpSeq: b.opSeq.Load(), Instance: recordOf(sh.instances[instanceID])})
	if err == nil {
		err = b.journal.append(line)
	}
	if err != nil {
		return osb.Errorf(http.StatusInternalServerError, "", "writing the state file: %v", err)
	}
	return nil
}

// encodeLine marshals a line, bytes of raw JSON kept as they are, with its
// newline.
func encodeLine(l journalLine) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// recordOf copies an instance into its record; nil stays nil.
func recordOf(in *instance) *instanceRecord {
	if in == nil {
		return nil
	}
	rec := &instanceRecord{Plan: in.plan.id, Org: in.org, Space: in.space, Params: in.params,
		Live: in.live, Deleted: in.deleted, Op: opRecordOf(in.op)}
	if len(in.bindings) > 0 {
		rec.Bindings = make(map[string]*bindingRecord, len(in.bindings))
		for id, bd := range in.bindings {
			rec.Bindings[id] = &bindingRecord{AppGUID: bd.appGUID, Params: bd.params, Credentials: bd.creds,
				Live: bd.live, Deleted: bd.deleted, Op: opRecordOf(bd.op)}
		}
	}
	return rec
}

func opRecordOf(o *operation) *operationRecord {
	if o == nil {
		return nil
	}
	rec := &operationRecord{Kind: opNames[o.kind], ID: o.id, Due: o.due, Fail: o.fail, Settled: o.settled, Params: o.params}
	if o.plan != nil {
		rec.Plan = o.plan.id
	}
	return rec
}

// instanceOf turns a record back into an instance.
func (b *Broker) instanceOf(rec *instanceRecord) (*instance, error) {
	p := b.defs.plans[rec.Plan]
	if p == nil {
		return nil, fmt.Errorf("plan %q is not in the catalog", rec.Plan)
	}
	op, err := b.operationOf(rec.Op)
	if err != nil {
		return nil, err
	}
	in := &instance{plan: p, org: rec.Org, space: rec.Space, params: rawOrNil(rec.Params),
		live: rec.Live, deleted: rec.Deleted, op: op}
	if len(rec.Bindings) > 0 {
		in.bindings = make(map[string]*binding, len(rec.Bindings))
	}
	for id, br := range rec.Bindings {
		op, err := b.operationOf(br.Op)
		if err != nil {
			return nil, fmt.Errorf("binding %s: %w", id, err)
		}
		in.bindings[id] = &binding{appGUID: br.AppGUID, params: rawOrNil(br.Params), creds: rawOrNil(br.Credentials),
			live: br.Live, deleted: br.Deleted, op: op}
	}
	return in, nil
}

func (b *Broker) operationOf(rec *operationRecord) (*operation, error) {
	if rec == nil {
		return nil, nil
	}
	kind := slices.Index(opNames[:], rec.Kind)
	if kind < 0 {
		return nil, fmt.Errorf("operation kind %q is unknown", rec.Kind)
	}
	o := &operation{kind: opKind(kind), id: rec.ID, due: rec.Due, fail: rec.Fail, settled: rec.Settled,
		params: rawOrNil(rec.Params)}
	if rec.Plan != "" {
		if o.plan = b.defs.plans[rec.Plan]; o.plan == nil {
			return nil, fmt.Errorf("operation %s: plan %q is not in the catalog", rec.ID, rec.Plan)
		}
	}
	return o, nil
}

// rawOrNil keeps an absent JSON value nil, as the broker keeps it.
func rawOrNil(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

// openJournal replays the state file at path into b's store, compacts it
// and opens it for appending.
func (b *Broker) openJournal(path string) error {
	if err := b.replay(path); err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	if err := b.compact(path); err != nil {
		return fmt.Errorf("state file %s: compacting: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	b.journal = &journal{f: f, path: path}
	return nil
}

// replay reads the state file; a missing file is an empty one.
func (b *Broker) replay(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	last := make(map[string]*instanceRecord)
	var seq uint64
	for n := 1; ; n++ {
		line, rest, complete := bytes.Cut(data, []byte{'\n'})
		if !complete {
			break // empty, or a torn final line: its answer was never sent
		}
		data = rest
		var l journalLine
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		seq = max(seq, l.OpSeq)
		if l.ID != "" {
			last[l.ID] = l.Instance
		}
	}
	for id, rec := range last {
		if rec == nil {
			continue
		}
		in, err := b.instanceOf(rec)
		if err != nil {
			return fmt.Errorf("instance %s: %w", id, err)
		}
		sh := b.store.lock(id)
		sh.instances[id] = in
		sh.mu.Unlock()
	}
	b.opSeq.Store(seq)
	return nil
}

// compact writes the store, one line per instance in id order after a line
// with the operation counter, to a new file and renames it over path.
func (b *Broker) compact(path string) error {
	lines := [][]byte{}
	head, err := encodeLine(journalLine{OpSeq: b.opSeq.Load()})
	if err != nil {
		return err
	}
	var ids []string
	for i := range b.store.shards {
		sh := &b.store.shards[i]
		sh.mu.Lock()
		for id := range sh.instances {
			ids = append(ids, id)
		}
		sh.mu.Unlock()
	}
	slices.Sort(ids)
	lines = append(lines, head)
	for _, id := range ids {
		sh := b.store.lock(id)
		line, err := encodeLine(journalLine{ID: id, OpSeq: b.opSeq.Load(), Instance: recordOf(sh.instances[id])})
		sh.mu.Unlock()
		if err != nil {
			return err
		}
		lines = append(lines, line)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(bytes.Join(lines, nil))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
