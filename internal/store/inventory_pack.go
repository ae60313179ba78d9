package store

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// Inventory record bodies are deflated (compress/flate, default level)
// with a preset dictionary of what records hold. Measured on a Cloud
// Controller instance (BenchmarkInventoryPack): 716 bytes become 344 (325
// without the instance id in its dashboard URL: inventory_codec.go), which
// is what keeps a million instances within 1 GB on the heap (about 1,000
// bytes per instance without it) and in the bolt file (about 1,500), for
// 15 to 35 µs to pack and 6 µs to unpack a record. The GUIDs a record
// repeats (organization and space, top-level and in the context) cost a
// back-reference, and hex digits about half a byte each. Sealed secrets
// are deflated as stored blobs: ciphertext, never plaintext, goes through
// the compressor.
//
// recordDictionary must never change: records written with it cannot be
// read with another. A new dictionary needs a new record format byte.
var recordDictionary = []byte(`` +
	`[{"driver":"","container_dir":"","mode":"rw","device_type":"shared","device":{"volume_id":"","mount_config":{}}}]` +
	`[{"host":"","ports":[""],"protocol":"tcp"}]` +
	`{"labels":{},"attributes":{}}` +
	`{"app_guid":"","route":"","credential_client_id":""}` +
	`syslog://https://` +
	`{"platform":"kubernetes","namespace":"default","clusterid":""}` +
	`{"version":"","description":""}` +
	`provision-update-deprovision-bind-unbind-succeededfailedin progress` +
	`{"platform":"cloudfoundry","organization_guid":"","organization_name":"","space_guid":"",` +
	`"space_name":"","instance_name":"","organization_annotations":{},"space_annotations":{},"instance_annotations":{}}`)

// A flate.Writer holds about 1 MB of tables: at most maxDeflaters exist
// (packing is CPU-bound, more would only hold memory; four pack over
// 200,000 records a second). Readers hold 40 kB of window and are pooled,
// with the buffers they fill.
var (
	deflaters = newWriterPool(min(runtime.GOMAXPROCS(0), maxDeflaters))
	inflaters = sync.Pool{New: func() any { return flate.NewReader(nil) }}
	buffers   = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

const maxDeflaters = 4

// writerPool hands out flate writers, making at most cap(free) of them.
type writerPool struct {
	mu   sync.Mutex
	made int
	free chan *flate.Writer
}

func newWriterPool(n int) *writerPool { return &writerPool{free: make(chan *flate.Writer, n)} }

// get returns a free writer, a new one while fewer than the cap exist, or
// waits for one.
func (p *writerPool) get() *flate.Writer {
	select {
	case w := <-p.free:
		return w
	default:
	}
	p.mu.Lock()
	if p.made < cap(p.free) {
		p.made++
		p.mu.Unlock()
		w, err := flate.NewWriterDict(nil, flate.DefaultCompression, recordDictionary)
		if err != nil { // only for a bad level
			panic(err)
		}
		return w
	}
	p.mu.Unlock()
	return <-p.free
}

func (p *writerPool) put(w *flate.Writer) { p.free <- w }

// pack returns the plain record rec with its body deflated, in a slice of
// its own length, or rec itself if deflating does not make it shorter.
func pack(rec []byte) []byte {
	head := 2 + int(rec[1])
	buf := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(buf)
	buf.Reset()
	buf.WriteByte(recordDeflated)
	buf.Write(rec[1:head])
	w := deflaters.get()
	w.Reset(buf)
	w.Write(rec[head:]) // a bytes.Buffer does not fail
	w.Close()
	deflaters.put(w)
	if buf.Len() >= len(rec) {
		return rec
	}
	return bytes.Clone(buf.Bytes())
}

var errNotRecord = errors.New("not an inventory record of format 1 or 2")

// Unpack calls fn with the tenant and the plain body of rec. The body is
// valid only during fn.
func Unpack(rec []byte, fn func(tenant string, body []byte) error) error {
	tenant, ok := RecordTenant(rec)
	if !ok {
		return errNotRecord
	}
	body := rec[2+len(tenant):]
	if rec[0] == recordPlain {
		return fn(tenant, body)
	}
	r := inflaters.Get().(io.ReadCloser)
	defer inflaters.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(body), recordDictionary); err != nil {
		return err
	}
	buf := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(buf)
	buf.Reset()
	// A record was at most MaxRecordLen bytes before it was deflated: a
	// damaged one does not inflate without bound.
	if _, err := buf.ReadFrom(io.LimitReader(r, MaxRecordLen+1)); err != nil {
		return fmt.Errorf("inflate: %w", err)
	}
	if buf.Len() > MaxRecordLen {
		return fmt.Errorf("inflates to more than %d bytes", MaxRecordLen)
	}
	return fn(tenant, buf.Bytes())
}
