package config

import (
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Default API version range of a broker, parsed from the string constants.
var (
	defaultBrokerMinVersion = osb.MustParseVersion(DefaultBrokerMinVersionString)
	defaultBrokerMaxVersion = osb.MustParseVersion(DefaultBrokerMaxVersionString)
)

// ApplyDefaults fills every zero-valued field that has a default with it
// (see the Default constants). Parse calls it; tests that build a Config by
// hand may too. It is idempotent.
//
// A route without a prefix gets "/<tenant>/<broker>" when both names are
// valid names; otherwise its prefix stays empty and only the names are
// reported.
func (c *Config) ApplyDefaults() {
	c.Listen.applyDefaults()
	if c.Admin.Address == "" {
		c.Admin.Address = DefaultAdminAddress
	}
	if c.Log.Format == "" {
		c.Log.Format = DefaultLogFormat
	}
	if c.Log.Level == "" {
		c.Log.Level = DefaultLogLevel
	}
	if c.Log.AccessFlushInterval == nil {
		d := DefaultAccessFlushInterval
		c.Log.AccessFlushInterval = &d
	}
	c.Runtime.applyDefaults() // runtime.go
	c.State.applyDefaults()
	c.Reload.applyDefaults()
	setDuration(&c.Inventory.ExpiryWarning, DefaultExpiryWarning)
	setDuration(&c.Inventory.UsageRetention, DefaultUsageRetention)
	c.Auth.applyDefaults()
	if c.Catalog.MaxEntries == 0 {
		c.Catalog.MaxEntries = DefaultCatalogMaxEntries
	}
	if c.Catalog.MaxBytes == 0 {
		c.Catalog.MaxBytes = DefaultCatalogMaxBytes
	}
	if c.Catalog.RequireWarm {
		c.Catalog.Warm = true
	}
	if c.Catalog.OnDrift == "" {
		c.Catalog.OnDrift = DefaultOnDrift
	}
	for i := range c.Tenants {
		c.Tenants[i].applyDefaults()
	}
	for i := range c.Brokers {
		c.Brokers[i].applyDefaults()
	}
	applyTLSDefaults(c) // listen_tls.go
	applyTelemetryDefaults(c)
}

func (l *Listen) applyDefaults() {
	if l.Address == "" {
		l.Address = DefaultListenAddress
	}
	setDuration(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	if l.Server == "" {
		l.Server = DefaultListenServer
	}
	setDuration(&l.ReadTimeout, DefaultReadTimeout)
	setDuration(&l.WriteTimeout, DefaultWriteTimeout)
	setDuration(&l.IdleTimeout, DefaultIdleTimeout)
	setDuration(&l.ShutdownGrace, DefaultShutdownGrace)
	if l.ShutdownDelay == nil {
		d := DefaultShutdownDelay
		l.ShutdownDelay = &d
	}
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
}

func (t *Tenant) applyDefaults() {
	if t.MissingVersionStatus == 0 {
		t.MissingVersionStatus = DefaultMissingVersionStatus
	}
	t.Limits.applyDefaults() // limits.go
	for i := range t.Routes {
		r := &t.Routes[i]
		r.Limits.applyDefaults()
		if r.Prefix == "" && validName(t.Name) && validName(r.Broker) {
			r.Prefix = "/" + t.Name + "/" + r.Broker
		}
	}
}

func (b *Broker) applyDefaults() {
	setDuration(&b.Timeout, DefaultBrokerTimeout)
	setDuration(&b.DialTimeout, DefaultDialTimeout)
	setDuration(&b.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	setDuration(&b.IdleConnTimeout, DefaultIdleConnTimeout)
	setDuration(&b.ResponseHeaderTimeout, b.Timeout)
	setDuration(&b.Catalog.TTL, DefaultCatalogTTL)
	setDuration(&b.Catalog.RetryInterval, DefaultCatalogRetryInterval)
	setDuration(&b.Catalog.RetryMaxInterval, max(DefaultCatalogRetryMaxInterval, b.Catalog.RetryInterval))
	if b.ConcurrencyError == "" {
		b.ConcurrencyError = DefaultConcurrencyError
	}
	if b.OrphanMitigation == "" {
		b.OrphanMitigation = DefaultOrphanMitigation
	}
	if b.OrphanSchedule == "" {
		b.OrphanSchedule = DefaultOrphanSchedule
	}
	if b.LockGranularity == "" {
		b.LockGranularity = DefaultLockGranularity
	}
	setDuration(&b.HoldAfterTimeout, b.Timeout)
	b.applyInventoryDefaults()
	b.applyProtectDefaults()
	if b.Validation.Requests == "" {
		b.Validation.Requests = DefaultRequestMode
	}
	if b.Validation.Responses == "" {
		b.Validation.Responses = DefaultResponseMode
	}
	if b.Validation.WithoutCatalog == "" {
		b.Validation.WithoutCatalog = DefaultWithoutCatalog
	}
	if b.Transport == "" {
		b.Transport = DefaultBrokerTransport
	}
	if b.MaxIdleConns == 0 {
		b.MaxIdleConns = DefaultMaxIdleConnsPerBroker
	}
	if b.APIVersion.Min.IsZero() {
		b.APIVersion.Min = defaultBrokerMinVersion
	}
	if b.APIVersion.Max.IsZero() {
		b.APIVersion.Max = defaultBrokerMaxVersion
	}
}

// setDuration sets *d to def when *d is zero.
func setDuration(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}
