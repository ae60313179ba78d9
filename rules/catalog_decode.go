package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// wireCatalog is a catalog body as decoded: the osb types plus what they
// cannot tell, such as whether a service sent "bindable" at all.
type wireCatalog struct {
	Services []wireService `json:"services"`
}

// wireService shadows osb.Service's "bindable" with a pointer, so that a
// missing field is told apart from false; decodeCatalog copies the pointer's
// value into the embedded field.
type wireService struct {
	osb.Service
	Bindable *bool `json:"bindable"`
}

// decodeCatalog decodes a catalog body. Errors name the byte offset and,
// for a value of the wrong type, the JSON path of that value.
func decodeCatalog(body []byte) (*wireCatalog, error) {
	var w wireCatalog
	err := json.Unmarshal(body, &w)
	if err == nil {
		for i := range w.Services {
			if b := w.Services[i].Bindable; b != nil {
				w.Services[i].Service.Bindable = *b
			}
		}
		return &w, nil
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return nil, &decodeError{fmt.Sprintf("the catalog is not valid JSON: byte offset %d: %s", syn.Offset, syn), err}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		at := jsonPathAt(body, te.Offset)
		if at == "" {
			return nil, &decodeError{fmt.Sprintf("the catalog is a JSON %s, not an object", te.Value), err}
		}
		return nil, &decodeError{fmt.Sprintf("the catalog does not decode: %s (byte offset %d): got a JSON %s, want %s",
			at, te.Offset, te.Value, jsonKindOf(te.Type)), err}
	}
	return nil, &decodeError{"the catalog does not decode: " + err.Error(), err}
}

// decodeError is why a catalog body does not decode, worded for a person;
// it wraps encoding/json's error.
type decodeError struct {
	msg string
	err error
}

func (e *decodeError) Error() string { return e.msg }
func (e *decodeError) Unwrap() error { return e.err }

// toCatalog converts the decoded wire form into the osb model.
func (w *wireCatalog) toCatalog() osb.Catalog {
	c := osb.Catalog{Services: make([]osb.Service, len(w.Services))}
	for i := range w.Services {
		c.Services[i] = w.Services[i].Service
	}
	return c
}

// jsonKindOf names the JSON type a Go type decodes from, for error messages.
func jsonKindOf(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a " + t.Kind().String()
}

// pathFrame is one open container while jsonPathAt walks a document.
type pathFrame struct {
	object    bool
	expectKey bool   // object: the next string token is a key
	key       string // object: the current member's key
	index     int    // array: the current element's index
}

// jsonPathAt returns the path (services[0].plans[1].free) of the value that
// ends at byte offset off, or starts a container there, as the offsets of
// json.UnmarshalTypeError do. The root value has the empty path. It reads
// body again token by token, so it is for error paths only.
func jsonPathAt(body []byte, off int64) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []pathFrame
	for {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return framesPath(stack)
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
			if key, ok := tok.(string); ok {
				stack[n-1].key, stack[n-1].expectKey = key, false
				continue
			}
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			advancePath(stack)
			continue
		}
		if dec.InputOffset() >= off {
			return framesPath(stack)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, pathFrame{object: true, expectKey: true})
		case json.Delim('['):
			stack = append(stack, pathFrame{})
		default:
			advancePath(stack)
		}
	}
}

// advancePath moves the innermost open container past its current value.
func advancePath(stack []pathFrame) {
	if n := len(stack); n > 0 {
		if stack[n-1].object {
			stack[n-1].expectKey = true
		} else {
			stack[n-1].index++
		}
	}
}

// framesPath formats the open containers as a path: keys joined by dots,
// array indexes in brackets.
func framesPath(stack []pathFrame) string {
	var b []byte
	for _, f := range stack {
		if f.object {
			if len(b) > 0 {
				b = append(b, '.')
			}
			b = append(b, f.key...)
			continue
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(f.index), 10)
		b = append(b, ']')
	}
	return string(b)
}
