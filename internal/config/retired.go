package config

import (
	"reflect"

	"go.yaml.in/yaml/v3"
)

// What a retired broker's deprovisions and unbinds get
// (brokers[].retired.answer).
const (
	// RetiredForward forwards them to the broker, which still answers.
	RetiredForward = "forward"
	// RetiredGone answers them 410 Gone from the gateway without calling
	// the broker, and drops the instance or binding from the inventory, so
	// that platforms purge their records of a broker that is gone.
	RetiredGone = "gone"
)

// Retired marks a broker retired (brokers[].retired), written `true` or as
// a mapping `{answer: gone}`. A retired broker gets no new provision or
// bind: the gateway refuses them (422) before the broker is called, so
// nothing is orphaned; its instances can still be unbound and
// deprovisioned, and its catalog is served from the cache. Zero value: not
// retired.
type Retired struct {
	// On is true when the broker is retired: `retired: true`, or the
	// mapping form.
	On bool `yaml:"-"`
	// Answer is what deprovisions and unbinds get: RetiredForward (the
	// broker answers them) or RetiredGone (410 from the gateway); with
	// RetiredGone, updates are refused too. Zero value: RetiredForward.
	Answer string `yaml:"answer" validate:"omitempty,oneof=forward gone"`
}

// Gone reports whether the gateway answers the broker's deprovisions and
// unbinds 410 Gone itself.
func (r Retired) Gone() bool { return r.On && r.Answer == RetiredGone }

var retiredType = reflect.TypeFor[Retired]()

// retired decodes brokers[].retired: a boolean (or a ${NAME} reference to
// one), or a mapping of Retired's keys, which retires the broker.
func (d *decoder) retired(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.MappingNode {
		d.mapping(n, v, path)
		v.FieldByName("On").SetBool(true)
		return
	}
	if n.Kind != yaml.ScalarNode {
		d.probs.addf(path, "must be true, false or a mapping such as {answer: gone}, not %s (line %d)", kindName(n), n.Line)
		return
	}
	d.scalar(n, v.FieldByName("On"), path)
}

// retiredSchema is the schema of brokers[].retired: a boolean or the
// mapping form.
func (g schemaGen) retiredSchema(t reflect.Type) schema {
	return schema{"anyOf": []any{schema{"type": "boolean"}, schema{"type": "string", "pattern": envRefPattern}, g.object(t)}}
}
