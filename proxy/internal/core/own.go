package core

import "context"

// OriginGateway is the origin of what the gateway does on its own, in
// audit records, access lines and spans.
const OriginGateway = "gateway"

// ownCtx is what the gateway's own broker calls carry in their context:
// who asked (the span's osb.operator) and the request identity the broker
// gets (ownRequest).
type ownCtx struct{ who, requestID string }

type ownCtxKey struct{}

// WithOperator returns ctx naming who asked for the gateway's own calls
// made under it, and the request identity they send.
func WithOperator(ctx context.Context, who, requestID string) context.Context {
	return context.WithValue(ctx, ownCtxKey{}, ownCtx{who: who, requestID: requestID})
}

// OperatorFrom is who asked for the gateway's own call under ctx; "" when
// nobody said.
func OperatorFrom(ctx context.Context) string {
	o, _ := ctx.Value(ownCtxKey{}).(ownCtx)
	return o.who
}

// OwnRequestID is the request identity set by withOperator; "" for none.
func OwnRequestID(ctx context.Context) string {
	o, _ := ctx.Value(ownCtxKey{}).(ownCtx)
	return o.requestID
}
