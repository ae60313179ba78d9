package core

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// FormatTraceParent returns sc as a W3C traceparent value
// ("00-<trace id>-<span id>-<flags>"), or "" when sc is not valid.
func FormatTraceParent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	const hexdigits = "0123456789abcdef"
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	tid, sid := sc.TraceID(), sc.SpanID()
	for i, c := range tid {
		b[3+2*i], b[4+2*i] = hexdigits[c>>4], hexdigits[c&0xf]
	}
	b[35] = '-'
	for i, c := range sid {
		b[36+2*i], b[37+2*i] = hexdigits[c>>4], hexdigits[c&0xf]
	}
	b[52] = '-'
	f := byte(sc.TraceFlags())
	b[53], b[54] = hexdigits[f>>4], hexdigits[f&0xf]
	return string(b[:])
}

// ParseTraceParent parses a W3C traceparent value.
func ParseTraceParent(tp string) (trace.SpanContext, bool) {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// TraceIDOf returns the trace id of a W3C traceparent, or "".
func TraceIDOf(tp string) string {
	if len(tp) < 55 || tp[2] != '-' {
		return ""
	}
	return tp[3:35]
}

// TruncateTo caps s at n bytes.
func TruncateTo(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
