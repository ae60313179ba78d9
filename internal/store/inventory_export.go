package store

import (
	"cmp"
	"context"
	"iter"
)

// exportPage is how many records Export reads at a time.
const exportPage = 1000

// BindingPos is a place in the order of all bindings: (Broker, Instance,
// Binding), the broker, instance id and binding id. The zero value is
// before the first binding.
type BindingPos struct{ Broker, Instance, Binding string }

// ComparePos orders positions as the bindings they name: -1 if a is before
// b, 0 if they are the same, +1 if a is after b.
func ComparePos(a, b BindingPos) int {
	return cmp.Or(cmp.Compare(a.Broker, b.Broker), cmp.Compare(a.Instance, b.Instance), cmp.Compare(a.Binding, b.Binding))
}

// bindingsAfter returns up to limit bindings after pos, in order, the
// position to continue after (the last binding it looked at, which may
// have been deleted before it was read), and whether it reached the last
// binding. Each backend has one.
type bindingsAfter func(ctx context.Context, pos BindingPos, limit int) ([]Binding, BindingPos, bool, error)

// Export is Inventory.Export for any backend: the instances page by page through
// list, then the bindings through after.
func Export(ctx context.Context, list func(context.Context, InstanceFilter, string, int) ([]Instance, string, error),
	after bindingsAfter) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		cursor := ""
		for {
			page, next, err := list(ctx, InstanceFilter{}, cursor, exportPage)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			for i := range page {
				if !yield(Entry{Instance: &page[i]}, nil) {
					return
				}
			}
			if cursor = next; next == "" {
				break
			}
		}
		var pos BindingPos
		for {
			page, next, done, err := after(ctx, pos, exportPage)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			for i := range page {
				if !yield(Entry{Binding: &page[i]}, nil) {
					return
				}
			}
			if done {
				return
			}
			pos = next
		}
	}
}
