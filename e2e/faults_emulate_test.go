package e2e

import (
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// Platform calls of the emulation rows (brokers[].emulate).
var (
	getInstance = platformCall{"GET instance", samplebroker.EndpointGetInstance, func(c osb.Client, id string) error {
		_, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: id})
		return err
	}}
	deprovision = platformCall{"deprovision", samplebroker.EndpointDeprovision, func(c osb.Client, id string) error {
		_, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: serviceID, PlanID: samplebroker.PlanSyncID})
		return err
	}}
)
