// Package e2e drives the gateway end to end with a real Open Service Broker
// client (sigs.k8s.io/go-open-service-broker-client/v2) against real brokers
// on loopback listeners:
//
//   - the project's own sample broker (internal/samplebroker), OSB 2.17;
//   - the same sample broker in legacy mode, behaving like OSB 2.8;
//   - an in-memory broker built on code.cloudfoundry.org/brokerapi/v13, the
//     library most Cloud Foundry brokers are written with.
//
// One gateway serves all three to two tenants. The tests walk every broker
// through the whole lifecycle (catalog, synchronous and asynchronous
// provision, update, bind, unbind and deprovision, with polling), check that
// every answer passes through byte for byte, and check that calls the gateway
// refuses (wrong credentials, too old an API version) never reach a broker.
//
// Asynchronous operations complete on a clock the tests advance, so polling is
// deterministic and takes no wall time.
//
// The OSB client needs k8s.io/klog/v2; go.mod selects v2.140.0 because the
// v2.0.0 the client asks for does not build against the go-logr/logr v1.4.2
// that brokerapi v13 needs.
package e2e
