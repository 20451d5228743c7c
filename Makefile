# Image URL to use for building and pushing the manager image.
IMG ?= diskschedule:latest
# SCHEDULER_IMG is the second scheduler's image: kube-scheduler with the diskschedule plugin.
SCHEDULER_IMG ?= diskschedule-scheduler:latest

LOCALBIN ?= $(shell pwd)/bin
K8S_BIN ?= $(LOCALBIN)/k8s
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
KUSTOMIZE ?= $(LOCALBIN)/kustomize
KUBECTL ?= kubectl

# Tests use KUBEBUILDER_ASSETS when it is set, else the control plane built into bin/k8s.
TEST_ASSETS = $(if $(KUBEBUILDER_ASSETS),$(KUBEBUILDER_ASSETS),$(K8S_BIN))
GO_TEST_FLAGS ?= -timeout 45m -parallel 2

# The packages whose tests start sandboxes. go test starts packages in the
# order it is given them, two at a time on 2 cores: test/e2e (the longest;
# its tests wait on Longhorn and the control plane more than they compute,
# and run two sandboxes side by side) first, beside the shorter suites and
# every other package; the suites that bound Longhorn's stalls in seconds
# (gate, stall) last, once test/e2e is done with the machine; test/failover,
# whose bound is a write held at most 2 s while the leader changes, alone
# after them (beside test/gate, on 2 cores, its test process starves: writes
# held 2.2-2.6 s).
SANDBOX_FIRST = ./test/e2e ./test/longhorn ./test/infrastructure/sandbox ./cmd/sandbox ./test/versions
SANDBOX_LAST = ./test/gate ./test/stall
SANDBOX_ALONE = ./test/failover
SANDBOX_PACKAGES = $(SANDBOX_FIRST) $(SANDBOX_LAST) $(SANDBOX_ALONE)
# OTHER_PACKAGES lists every other package.
OTHER_PACKAGES = go list ./... | grep -v -x -F $(foreach p,$(SANDBOX_PACKAGES),-e github.com/longhorn/diskschedule/$(patsubst ./%,%,$(p)))

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-15s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate CRDs and RBAC from the API types and markers, and copy them into the Helm chart.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/..." paths="./internal/..." paths="./cmd/..." output:crd:artifacts:config=config/crd/bases
	@$(MAKE) --no-print-directory chart

CHART ?= dist/chart

.PHONY: chart
chart: ## Copy into the Helm chart (dist/chart/files) what its templates read from config/: the CRD, the manager's RBAC rules, the gate's and the pod webhook's configurations, the second scheduler's configuration, the alert rules and the Grafana dashboard.
	cp config/crd/bases/longhorn.io_diskschedules.yaml $(CHART)/files/longhorn.io_diskschedules.yaml
	cp config/rbac/role.yaml $(CHART)/files/role.yaml
	cp config/webhook/manifests.yaml $(CHART)/files/gate.yaml
	cp config/webhook/pods.yaml $(CHART)/files/pods.yaml
	cp config/scheduler/secondary/kube-scheduler-config.yaml $(CHART)/files/secondary-scheduler.yaml
	cp config/prometheus/diskschedule.rules.yaml $(CHART)/files/diskschedule.rules.yaml
	cp config/grafana/diskschedule-dashboard.json $(CHART)/files/diskschedule-dashboard.json

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods for the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: verify
verify: controller-gen ## Fail when generated files differ from what the generators produce now, or Go files are not gofmt-formatted.
	@hack/verify-generated.sh "$(CONTROLLER_GEN)"
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "verify: not gofmt-formatted (run make fmt):" $$unformatted >&2; exit 1; fi

.PHONY: fmt
fmt: ## Run go fmt against code.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet against code.
	go vet ./...

.PHONY: test
test: verify vet controlplane sandbox-longhorn sandbox-csi build-scheduler ## Check generated files, vet, and run every test against a real kube-apiserver and etcd (test/e2e first, the suites with bounds in seconds last, test/failover alone).
	KUBEBUILDER_ASSETS="$(TEST_ASSETS)" go test $(SANDBOX_FIRST) $$($(OTHER_PACKAGES)) $(SANDBOX_LAST) $(GO_TEST_FLAGS)
	KUBEBUILDER_ASSETS="$(TEST_ASSETS)" go test $(SANDBOX_ALONE) $(GO_TEST_FLAGS)

.PHONY: test-unit
test-unit: controlplane ## An author's inner loop: every package but the sandbox suites (the product's packages, config/, the harness's own unit tests) against envtest.
	KUBEBUILDER_ASSETS="$(TEST_ASSETS)" go test $$($(OTHER_PACKAGES)) $(GO_TEST_FLAGS)

.PHONY: test-e2e
test-e2e: controlplane sandbox-longhorn sandbox-csi build-scheduler ## The sandbox suites alone: the end-to-end tests, the gate under attack, the stalls, failover, Longhorn's controllers, the sandbox itself.
	KUBEBUILDER_ASSETS="$(TEST_ASSETS)" go test $(SANDBOX_FIRST) $(SANDBOX_LAST) $(GO_TEST_FLAGS)
	KUBEBUILDER_ASSETS="$(TEST_ASSETS)" go test $(SANDBOX_ALONE) $(GO_TEST_FLAGS)

# FUZZ_TARGETS lists each fuzz test as Name:package; FUZZTIME is how long each runs.
FUZZ_TARGETS = FuzzDecide:./internal/ledger FuzzAdmissionReview:./internal/gate FuzzFilterHandler:./internal/extender \
	FuzzPack:./internal/extender/packing FuzzPlacementAgainstLonghorn:./internal/placement
FUZZTIME ?= 5s

.PHONY: fuzz
fuzz: ## Run each fuzz test for FUZZTIME (5s); their seed corpora (testdata/fuzz) already run with go test.
	@for target in $(FUZZ_TARGETS); do \
		name=$${target%%:*}; pkg=$${target#*:}; \
		echo "go test -run='^$$' -fuzz='^$$name$$' -fuzztime=$(FUZZTIME) $$pkg"; \
		go test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	done

SANDBOX_ARGS ?=

.PHONY: sandbox
sandbox: controlplane sandbox-longhorn sandbox-csi build-scheduler ## Run etcd, kube-apiserver, kube-controller-manager, kube-scheduler (with the extender), the manager and Longhorn (longhorn-manager v1.12.0's own controllers on a simulated data plane) locally until ^C, and with --secondary-scheduler=true the second scheduler (bin/diskschedule-scheduler); flags in SANDBOX_ARGS.
	KUBEBUILDER_ASSETS="$(TEST_ASSETS)" go run ./cmd/sandbox $(SANDBOX_ARGS)

DEMO_ARGS ?=

.PHONY: demo
demo: controlplane sandbox-longhorn sandbox-csi build-scheduler ## Run the scheduler extender's test plan in sandboxes, with and without the extender, and claims beyond capacity with and without the admission gate, and print side-by-side reports; flags in DEMO_ARGS (-scenarios=claims runs one).
	KUBEBUILDER_ASSETS="$(TEST_ASSETS)" go run ./cmd/sandbox-demo $(DEMO_ARGS)

##@ Build

.PHONY: build
build: manifests generate fmt vet ## Build the manager binary.
	go build -o $(LOCALBIN)/manager ./cmd

.PHONY: build-scheduler
build-scheduler: ## Build bin/diskschedule-scheduler, kube-scheduler with the diskschedule plugin compiled in, the sandbox's second scheduler (the first build takes minutes; the sandbox also builds it when it is stale).
	@echo "build-scheduler: building $(LOCALBIN)/diskschedule-scheduler"
	go build -o $(LOCALBIN)/diskschedule-scheduler ./cmd/diskschedule-scheduler

.PHONY: docker-build
docker-build: ## Build the manager image (IMG) and the second scheduler's (SCHEDULER_IMG).
	docker build -t $(IMG) --target manager .
	docker build -t $(SCHEDULER_IMG) --target scheduler .

.PHONY: docker-push
docker-push: ## Push the manager image (IMG) and the second scheduler's (SCHEDULER_IMG).
	docker push $(IMG)
	docker push $(SCHEDULER_IMG)

.PHONY: run
run: manifests generate fmt vet ## Run the manager against the cluster in ~/.kube/config.
	go run ./cmd

##@ Deployment

.PHONY: install
install: manifests kustomize ## Install the DiskSchedule CRD into the cluster in ~/.kube/config.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: ## Remove the DiskSchedule CRD, and every DiskSchedule, from the cluster in ~/.kube/config, only when it carries the add-on's label app.kubernetes.io/name=diskschedule (refuses otherwise, saying why).
	go run ./cmd uninstall --webhooks=false --crd

.PHONY: deploy
deploy: manifests kustomize ## Deploy the add-on next to Longhorn (longhorn-system) in the cluster in ~/.kube/config; applies no Longhorn CRD.
	cd config/default && $(KUSTOMIZE) edit set image controller=$(IMG) diskschedule-scheduler=$(SCHEDULER_IMG)
	$(KUSTOMIZE) build config/default | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: kustomize ## Remove what deploy created, in the order that keeps Longhorn writing: the gate's webhook configuration while the managers still serve it, then the rest, then the CRD only when it carries the add-on's label.
	go run ./cmd uninstall --webhooks --crd=false
	$(KUSTOMIZE) build config/undeploy | $(KUBECTL) delete --ignore-not-found -f -
	go run ./cmd uninstall --webhooks=false --crd

##@ Dependencies

.PHONY: controlplane
controlplane: ## Build kube-apiserver, kube-controller-manager, kube-scheduler and etcd into bin/k8s (skipped when built or when KUBEBUILDER_ASSETS is set).
	@if [ -n "$(KUBEBUILDER_ASSETS)" ]; then \
		echo "controlplane: using KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS)"; \
	elif [ -x "$(K8S_BIN)/kube-apiserver" ] && [ -x "$(K8S_BIN)/kube-controller-manager" ] && [ -x "$(K8S_BIN)/kube-scheduler" ] && [ -x "$(K8S_BIN)/etcd" ]; then \
		echo "controlplane: already built in $(K8S_BIN)"; \
	else \
		hack/build-controlplane.sh "$(K8S_BIN)"; \
	fi

.PHONY: sandbox-longhorn
sandbox-longhorn: ## Build bin/sandbox-longhorn, longhorn-manager v1.12.0's own controllers and webhooks for the sandbox (the first build takes minutes; the sandbox also builds it when it is stale).
	@echo "sandbox-longhorn: building $(LOCALBIN)/sandbox-longhorn"
	go build -o $(LOCALBIN)/sandbox-longhorn ./cmd/sandbox-longhorn

.PHONY: sandbox-csi
sandbox-csi: ## Build bin/sandbox-csi, the CSI external-provisioner and external-resizer in front of Longhorn's CSI driver for the sandbox (the sandbox also builds it when it is stale).
	@echo "sandbox-csi: building $(LOCALBIN)/sandbox-csi"
	go build -o $(LOCALBIN)/sandbox-csi ./cmd/sandbox-csi

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Build controller-gen into bin/.
$(CONTROLLER_GEN): hack/tools/gen/go.mod
	@echo "tools: building controller-gen"
	cd hack/tools/gen && go build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

.PHONY: kustomize
kustomize: $(KUSTOMIZE) ## Build kustomize into bin/.
$(KUSTOMIZE): hack/tools/gen/go.mod
	@echo "tools: building kustomize"
	cd hack/tools/gen && go build -o $(KUSTOMIZE) sigs.k8s.io/kustomize/kustomize/v5
