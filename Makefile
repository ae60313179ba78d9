# The tests, as CI runs them (.ci/run): `make test`.
#
# test-race  every package with the race detector;
# test-alloc the proxied-GET allocation budget, which skips under -race
#            (the race detector changes sync.Pool's counts);
# test-std   the proxy and e2e suites again on the net/http server and the
#            standard broker transport, so both choices stay held;
# test-deploy the deployment tests, a module of their own (Helm and the
#            Kubernetes API types stay out of the gateway's go.mod); -count=1:
#            they read files outside their module, which the test cache does
#            not watch.
#
# campaign   the short fault campaign (bench/campaign -ci, about a minute and a
#            half): real gateways, brokers and redis-server under a seeded
#            nemesis, bolt and Redis side by side; .ci/run runs it after the
#            tests. Longer ones: go run ./bench/campaign -duration 30m ...
GO ?= go

.PHONY: test test-race test-alloc test-std test-deploy campaign
test: test-race test-alloc test-std test-deploy

test-race:
	$(GO) test -race ./...

test-alloc:
	$(GO) test -run Alloc ./proxy

test-std:
	OSB_GATEWAY_TEST_TRANSPORT=standard OSB_GATEWAY_TEST_SERVER=standard $(GO) test ./proxy ./e2e

test-deploy:
	cd deploy/test && $(GO) test -count=1 ./...

campaign:
	$(GO) run ./bench/campaign -ci
