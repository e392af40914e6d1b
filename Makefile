# Tool versions, pinned here and nowhere else. A bump takes effect on the next `make tools`:
# each tool is installed as bin/<name>-<version> and bin/<name> links to it.
# Temporal CLI v1.5.1 is the newest release that installs from the Go module proxy
# (DESIGN.md §2); staticcheck v0.8.x is the line that supports Go 1.26.
TEMPORAL_VERSION    ?= v1.5.1
STATICCHECK_VERSION ?= v0.8.2
HELM_VERSION        ?= v3.22.0
# The Kubernetes and etcd releases of the envtest assets (kube-apiserver, etcd, kubectl) that
# hack/envtest-assets.sh builds from the Go module proxy; the chart checks render for the same
# Kubernetes version. The script reads these two lines.
ENVTEST_K8S_VERSION  ?= v1.37.2
ENVTEST_ETCD_VERSION ?= v3.6.16
# The test cluster's DNS and NetworkPolicy engine (hack/cluster/assets.sh; make test-cluster).
# kube-router v2.1.0 is the one release the module proxy serves; advisories name it, which
# matters little for a test cluster's policy engine that runs only its firewall controller.
CLUSTER_COREDNS_VERSION     ?= v1.14.7
CLUSTER_KUBE_ROUTER_VERSION ?= v2.1.0
# agent-sandbox's controller (Sandbox, SandboxClaim, SandboxTemplate, SandboxWarmPool) and CRDs:
# v1.0.1 is the release the proxy serves (agents.x-k8s.io and extensions.agents.x-k8s.io v1beta1).
CLUSTER_AGENT_SANDBOX_VERSION ?= v1.0.1
# gVisor's runsc and containerd shim for the test cluster's RuntimeClass gvisor
# (hack/cluster/gvisor-assets.sh): a pseudo-version of gVisor's "go" branch, which builds with go build.
CLUSTER_GVISOR_VERSION      ?= v0.0.0-20260905035102-160fafc42237
# controller-gen writes the CRDs, the RBAC role and the deepcopy functions of api/ (DESIGN.md §8).
CONTROLLER_GEN_VERSION ?= v0.23.0

# The version every build stamps into the binary (`managed-agents version`, `--version`, logs).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

# The image `docker-build` tags.
IMG ?= managed-agents:dev
# The default sandbox image `sandbox-image` tags (the docker provider's default image).
SANDBOX_IMG ?= managed-agents-sandbox:dev
# The egress proxy image `egress-image` tags (the docker provider's default proxy image).
EGRESS_IMG ?= managed-agents-egress:dev
# The images of the chart's bundled PostgreSQL and Temporal dev server, built offline in place
# of postgres:15 and temporalio/temporal (docs/kubernetes.md#without-a-registry).
POSTGRES_IMG ?= managed-agents-postgres:15
TEMPORAL_IMG ?= managed-agents-temporal:$(TEMPORAL_VERSION:v%=%)
# Where hack/cluster/up.sh keeps the test cluster's state (make test-cluster).
CLUSTER_DIR ?= /var/lib/managed-agents-cluster
export CLUSTER_DIR
# go test's own default (10m per package binary) is too short for the integration suites.
TEST_TIMEOUT ?= 30m
# How long each fuzz target runs under `make fuzz` (`make test` runs each for 10s).
FUZZTIME ?= 1m

LOCALBIN := $(CURDIR)/bin
CA_BUNDLE := /etc/ssl/certs/ca-certificates.crt
# Files the Dockerfile copies into the image besides the binary.
IMAGE_ROOTFS := dist/image/rootfs
TEMPORAL := $(LOCALBIN)/temporal
STATICCHECK := $(LOCALBIN)/staticcheck
CONTROLLER_GEN := $(LOCALBIN)/controller-gen
HELM := $(LOCALBIN)/helm
CHART := charts/managed-agents
# Finds or builds the envtest assets and prints their directory last; every target that needs
# KUBEBUILDER_ASSETS takes it from here.
ENVTEST_ASSETS := ENVTEST_K8S_VERSION=$(ENVTEST_K8S_VERSION) ENVTEST_ETCD_VERSION=$(ENVTEST_ETCD_VERSION) hack/envtest-assets.sh

# Tests and `dev` look for the Temporal CLI on PATH: ./bin comes first.
export PATH := $(LOCALBIN):$(PATH)

.DEFAULT_GOAL := help
SHELL := /usr/bin/env bash -o pipefail

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: build
build: ## Build the managed-agents binary into bin/.
	CGO_ENABLED=0 go build -ldflags '$(LDFLAGS)' -o $(LOCALBIN)/managed-agents .

.PHONY: run
run: build ## Run everything a laptop needs in one process (managed-agents dev); Ctrl-C stops it.
	@# exec: the binary gets Ctrl-C itself and its exit status is make's (go run exits 1 on a signal).
	@exec $(LOCALBIN)/managed-agents dev

.PHONY: test
test: $(STATICCHECK) $(HELM) build docker-build sandbox-image egress-image postgres-image temporal-image verify-generated ## Run what CI runs (builds the binary, the container, sandbox, egress, PostgreSQL and Temporal images and the envtest assets first, no-ops when current; fails on stale generated files): go vet, staticcheck, the Helm checks, 100,000 inputs of each fuzz target, the real cluster's tests (make test-cluster), then all tests with -race, including the integration ones (PostgreSQL, Temporal, Docker, kube-apiserver, ...) and the dependency rules.
	go vet -tags integration ./...
	go vet -tags cluster ./internal/clustertest/ ./hack/...
	$(STATICCHECK) -tags integration ./...
	$(STATICCHECK) ./...
	$(MAKE) --no-print-directory helm-check
	@# A count, not a duration: Go 1.26's fuzz coordinator can fail a target with a bare
	@# "context deadline exceeded" when a duration ends under CPU load (golang/go#75804,
	@# fixed in Go 1.27). 100000 inputs take about 5–10 s per target here.
	$(MAKE) --no-print-directory fuzz FUZZTIME=100000x
	@# The real cluster's tests; a failure is reported after the package tests, so one run
	@# shows both.
	@rm -f dist/.test-cluster-failed; mkdir -p dist
	$(MAKE) --no-print-directory test-cluster || touch dist/.test-cluster-failed
	@# Last, so the run ends with go test's summary of every package.
	assets=$$($(ENVTEST_ASSETS) | tail -n1) && \
		KUBEBUILDER_ASSETS="$$assets" go test -race -tags integration -count=1 -timeout $(TEST_TIMEOUT) ./...
	@if [ -f dist/.test-cluster-failed ]; then echo "FAIL: make test-cluster (its output is above the package tests)" >&2; exit 1; fi

.PHONY: helm-check
helm-check: $(HELM) chart-crds-check ## Lint the Helm chart (--strict) and render it with the default and the production values.
	$(HELM) lint --strict --kube-version $(ENVTEST_K8S_VERSION) $(CHART)
	$(HELM) lint --strict --kube-version $(ENVTEST_K8S_VERSION) -f $(CHART)/ci/production-values.yaml $(CHART)
	$(HELM) template managed-agents $(CHART) --kube-version $(ENVTEST_K8S_VERSION) >/dev/null
	$(HELM) template managed-agents $(CHART) --kube-version $(ENVTEST_K8S_VERSION) -f $(CHART)/ci/production-values.yaml >/dev/null

.PHONY: chart-crds
chart-crds: ## Copy the generated CRDs and the controller's RBAC rules (config/) into the Helm chart.
	hack/chart-crds.sh

.PHONY: chart-crds-check
chart-crds-check: ## Fail when the chart's copies of the CRDs or RBAC rules differ from config/.
	hack/chart-crds.sh --check

.PHONY: envtest-assets
envtest-assets: ## Find or build kube-apiserver, etcd and kubectl for envtest (~10 min cold, seconds when cached) and print their directory.
	@$(ENVTEST_ASSETS)

.PHONY: fuzz
fuzz: ## Fuzz the request decoders, the event validator, host-pattern intersection and egress credentials, each for FUZZTIME (default 1m; a duration such as 5m, or a count of inputs such as 100000x).
	go test -run '^$$' -fuzz '^FuzzDecodeBody$$' -fuzztime $(FUZZTIME) ./internal/httpapi/
	go test -run '^$$' -fuzz '^FuzzClientEvent$$' -fuzztime $(FUZZTIME) ./internal/sessions/
	go test -run '^$$' -fuzz '^FuzzIntersect$$' -fuzztime $(FUZZTIME) ./internal/hostpattern/
	go test -run '^$$' -fuzz '^FuzzCredentials$$' -fuzztime $(FUZZTIME) ./internal/egress/

.PHONY: test-unit
test-unit: ## Run the unit tests only (fast, no services; includes the dependency rules).
	go test -race ./...

.PHONY: bench
bench: ## Run the benchmarks: event log (store), a step's log read (turns), in-process agent round (agent), sandbox providers (local, docker: needs make sandbox-image, sandboxd over loopback), a docker workspace disk's make and remove (root), full stack (e2e), the prompt cache of a 20-round tool session against the strict Messages API (e2e), then a short load run (managed-agents bench against a dev it starts).
	go test -tags integration -run '^$$' -bench . -benchtime=2s ./internal/store/
	go test -tags integration -run '^$$' -bench StepLogRead -benchtime=200x ./internal/turns/
	go test -run '^$$' -bench . ./internal/agent/ ./internal/tools/
	go test -tags integration -run '^$$' -bench Provider -benchtime=100x ./internal/sandbox/local/ ./internal/sandbox/docker/ ./internal/sandboxd/
	go test -run '^$$' -bench EnsureAndRemove -benchtime=10x ./internal/sandbox/disks/
	go test -tags integration -run '^$$' -bench 'Turn|Concurrent|CommitToSSE' -benchtime=40x ./internal/e2e/
	go test -tags integration -run '^$$' -bench RealModelCache -benchtime=3x ./internal/e2e/
	go run . bench --sessions 8 --turns 20 --scenario tool --warmup

.PHONY: lint
lint: $(STATICCHECK) ## Run go vet and staticcheck (over the integration tests too, and the unit-only files).
	go vet -tags integration ./...
	$(STATICCHECK) -tags integration ./...
	$(STATICCHECK) ./...

.PHONY: clean
clean: ## Remove build outputs (keeps the tools in bin/, which take minutes to build).
	rm -rf $(LOCALBIN)/managed-agents dist/

##@ Generated code

# What controller-gen reads: the API types and the reconcilers' RBAC markers.
GEN_PATHS := ./api/...;./controllers/...
# What it writes; verify-generated fails when any of it is stale.
GENERATED := api/v1alpha1/zz_generated.deepcopy.go config/crd/bases config/rbac/role.yaml charts/managed-agents/crds charts/managed-agents/files/rbac

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Write the CRDs (config/crd/bases) and the controller's ClusterRole (config/rbac/role.yaml) from the markers, and copy them into the chart.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="$(GEN_PATHS)" output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@# The chart cannot read config/: it keeps copies (checked by helm-check).
	hack/chart-crds.sh

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Write the deepcopy functions of api/ (zz_generated.deepcopy.go).
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: verify-generated
verify-generated: manifests generate ## Regenerate and fail when a generated file differs from the one committed (CI runs it).
	@git add -N $(GENERATED) 2>/dev/null || true
	@git diff --exit-code --stat -- $(GENERATED) || { echo "generated files are stale: run 'make manifests generate' and commit the result" >&2; exit 1; }

.PHONY: test-cluster
# CLUSTER_RUN narrows make test-cluster to the tests it matches (go test -run); empty runs all.
CLUSTER_RUN ?=
test-cluster: $(HELM) docker-build sandbox-image egress-image postgres-image temporal-image previous-release ## Bring up a real single-node cluster (hack/cluster/up.sh: kubelet, containerd, CoreDNS, a NetworkPolicy engine, agent-sandbox's controller; ~10 min cold, binaries cached in ~/.cache/managed-agents/cluster), load the images into it, run the cluster tests (internal/clustertest: the chart installed as docs/kubernetes.md says, sandbox pods, NetworkPolicies, pod kills), and tear it down (KEEP_CLUSTER=1 keeps it).
	@mkdir -p dist
	@# A failed or interrupted start is torn down too, not left half running.
	hack/cluster/up.sh $(IMG) $(PREV_IMG) $(SANDBOX_IMG) $(EGRESS_IMG) $(POSTGRES_IMG) $(TEMPORAL_IMG) > dist/cluster.env || \
		{ hack/cluster/down.sh; exit 1; }
	@status=0; trap 'hack/cluster/down.sh; exit 130' INT TERM; . ./dist/cluster.env && \
		KUBECTL=$(CLUSTER_DIR)/bin/kubectl HELM=$(abspath $(HELM)) IMG=$(IMG) SANDBOX_IMG=$(SANDBOX_IMG) \
		EGRESS_IMG=$(EGRESS_IMG) POSTGRES_IMG=$(POSTGRES_IMG) TEMPORAL_IMG=$(TEMPORAL_IMG) \
		PREV_CHART=$(CURDIR)/dist/previous/charts/managed-agents PREV_IMG=$(PREV_IMG) \
		go test -tags cluster -count=1 -timeout 45m -v -run '$(CLUSTER_RUN)' ./internal/clustertest/ || status=$$?; \
		if [ -z "$(KEEP_CLUSTER)" ]; then hack/cluster/down.sh; fi; exit $$status

# The release the upgrade test starts from (internal/clustertest TestUpgradeAndRollback): the
# chart and image of this commit, built into dist/previous and PREV_IMG.
CLUSTER_PREVIOUS_REF ?= 146bb64
PREV_IMG ?= managed-agents:previous

.PHONY: previous-release
previous-release: ## Build the chart and image of CLUSTER_PREVIOUS_REF (the upgrade test's starting point) into dist/previous and PREV_IMG; a no-op when current.
	@if [ -f dist/previous/.ref ] && [ "$$(cat dist/previous/.ref)" = "$(CLUSTER_PREVIOUS_REF)" ] && \
		docker image inspect $(PREV_IMG) >/dev/null 2>&1; then echo "$(PREV_IMG) is current ($(CLUSTER_PREVIOUS_REF))"; else \
		rm -rf dist/previous && mkdir -p dist/previous && \
		git archive --format=tar $(CLUSTER_PREVIOUS_REF) | tar -x -C dist/previous && \
		$(MAKE) --no-print-directory -C dist/previous docker-build IMG=$(PREV_IMG) VERSION=$(CLUSTER_PREVIOUS_REF) && \
		echo $(CLUSTER_PREVIOUS_REF) > dist/previous/.ref; fi

##@ Build

.PHONY: docker-build
docker-build: ## Build a static binary and the container image (IMG, default managed-agents:dev).
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w $(LDFLAGS)' -o $(LOCALBIN)/managed-agents .
	@# A scratch image has no CA bundle (the HTTPS model client needs one) and no /tmp.
	@test -f $(CA_BUNDLE) || { echo "$(CA_BUNDLE) is missing: apt-get install ca-certificates" >&2; exit 1; }
	rm -rf $(IMAGE_ROOTFS) dist/image/data
	mkdir -p $(IMAGE_ROOTFS)/etc/ssl/certs $(IMAGE_ROOTFS)/tmp dist/image/data
	chmod 1777 $(IMAGE_ROOTFS)/tmp
	cp $(CA_BUNDLE) $(IMAGE_ROOTFS)/etc/ssl/certs/ca-certificates.crt
	@# build/image/Dockerfile copies the binary: no base image to pull (the root Dockerfile
	@# compiles from source in golang, for machines with a registry).
	docker build -f build/image/Dockerfile -t $(IMG) .

.PHONY: sandbox-image
sandbox-image: ## Build the default sandbox image (SANDBOX_IMG) from Debian packages with debootstrap, as root, no registry; a no-op when current.
	hack/sandbox-image.sh $(SANDBOX_IMG)

.PHONY: egress-image
egress-image: ## Build the egress proxy image (EGRESS_IMG): the static binary, a CA bundle and a non-root user, with docker import; the import is skipped when current.
	VERSION=$(VERSION) hack/egress-image.sh $(EGRESS_IMG)

.PHONY: postgres-image
postgres-image: ## Build the chart's PostgreSQL image (POSTGRES_IMG) from Debian's postgresql-15 with debootstrap, as root, no registry; a no-op when current.
	hack/postgres-image.sh $(POSTGRES_IMG)

.PHONY: temporal-image
temporal-image: $(TEMPORAL) ## Build the chart's Temporal dev server image (TEMPORAL_IMG) from the pinned static Temporal CLI, with docker import; the import is skipped when current.
	TEMPORAL_VERSION=$(TEMPORAL_VERSION) hack/temporal-image.sh $(TEMPORAL_IMG)

##@ Tools

.PHONY: tools
tools: $(TEMPORAL) $(STATICCHECK) $(HELM) $(CONTROLLER_GEN) ## Install the pinned tools into bin/ (the Temporal CLI and Helm take a few minutes each to compile).

# bin/<tool>-<version> is built once per version; bin/<tool> is relinked every time (phony)
# so that it always points at the pinned version, also after a downgrade.
.PHONY: $(TEMPORAL) $(STATICCHECK) $(HELM) $(CONTROLLER_GEN)
$(TEMPORAL): $(TEMPORAL)-$(TEMPORAL_VERSION)
	@ln -sf $(notdir $<) $@
# Static, stripped and stamped with its version, as the CLI's release build: `make
# temporal-image` puts this very file into a scratch image.
$(TEMPORAL)-$(TEMPORAL_VERSION): export CGO_ENABLED = 0
$(TEMPORAL)-$(TEMPORAL_VERSION):
	$(call go-install,$@,github.com/temporalio/cli/cmd/temporal,$(TEMPORAL_VERSION),-trimpath -ldflags '-s -w -X github.com/temporalio/cli/temporalcli.Version=$(TEMPORAL_VERSION:v%=%)')

$(STATICCHECK): $(STATICCHECK)-$(STATICCHECK_VERSION)
	@ln -sf $(notdir $<) $@
$(STATICCHECK)-$(STATICCHECK_VERSION):
	$(call go-install,$@,honnef.co/go/tools/cmd/staticcheck,$(STATICCHECK_VERSION))

$(CONTROLLER_GEN): $(CONTROLLER_GEN)-$(CONTROLLER_GEN_VERSION)
	@ln -sf $(notdir $<) $@
$(CONTROLLER_GEN)-$(CONTROLLER_GEN_VERSION):
	$(call go-install,$@,sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_GEN_VERSION))

$(HELM): $(HELM)-$(HELM_VERSION)
	@ln -sf $(notdir $<) $@
# Helm's own release build stamps its version and the Kubernetes version it assumes without a
# cluster (else `helm version` says v3.22 and `helm template` renders for Kubernetes v1.20).
# The Kubernetes version is that of the client-go Helm builds with (v0.37 → 1.37), as in
# Helm's Makefile.
HELM_LDFLAGS := -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	-X helm.sh/helm/v3/internal/version.gitTreeState=clean \
	$(foreach p,pkg/chartutil pkg/lint/rules,-X helm.sh/helm/v3/$(p).k8sVersionMajor=1 -X helm.sh/helm/v3/$(p).k8sVersionMinor=37)
$(HELM)-$(HELM_VERSION):
	$(call go-install,$@,helm.sh/helm/v3/cmd/helm,$(HELM_VERSION),-trimpath -ldflags '$(HELM_LDFLAGS)')

# go-install installs package $(2) at version $(3) as the file $(1), with the go install flags
# $(4) if given. It builds in a temporary GOBIN so that a failed or interrupted build leaves
# nothing behind in bin/.
define go-install
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	echo "go install $(2)@$(3)"; \
	GOBIN="$$tmp" go install $(4) $(2)@$(3); \
	mkdir -p $(LOCALBIN); mv "$$tmp/$(notdir $(2))" $(1)
endef
