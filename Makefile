# talos-ccm build, test and demo entry points.

GO ?= go
BIN := $(CURDIR)/bin
GOTEST_FLAGS ?= -race -count=1 -timeout 25m
# The tests check that no reader changes a resource it read from the in-memory state, whose reads share
# what it stores (pkg/ccm/shared_reads.go): talos-ccm itself runs without the check.
GOTEST_ENV := TALOS_CCM_CHECK_SHARED_READS=1

.PHONY: test-fuzz test-faults test-k8s-versions test-bench-functions all build test envtest generate check-generate demo lint clean bench bench-quick bench-readme bench-clusters

all: build

## build: compile talos-ccm, ccmctl and talos-sim into ./bin.
# The commit `--version` prints (as the image build stamps it); "-dirty" when the tree has changes.
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X github.com/talos-ccm/talos-ccm/internal/version.commit=$(COMMIT)" -o $(BIN)/ ./cmd/...

## envtest: build kube-apiserver and etcd from Go modules (once per version) and print their directory.
## K8S_MINOR=1.35 builds an older supported minor (hack/envtest/k8s-1.35/go.mod) instead.
envtest:
	@hack/envtest.sh $(K8S_MINOR)

.PHONY: helm manifests

## helm: build helm from its Go module (once per version) and print its path.
helm:
	@hack/helm.sh

## manifests: render the Helm chart (deploy/helm/talos-ccm) into deploy/manifests; a test checks they agree.
manifests:
	@hack/manifests.sh

## test: every unit, controller and end-to-end test (builds the envtest binaries when missing).
test:
	@assets="$$(hack/envtest.sh)" && \
		echo "using envtest binaries in $$assets" && \
		KUBEBUILDER_ASSETS="$$assets" $(GOTEST_ENV) $(GO) test $(GOTEST_FLAGS) ./...

## test-faults: the fault suite (test/faults, build tag faults), on envtest and talos-sim: talos-ccm killed
## while it initializes 1,000 nodes, the apiserver restarted, the Talos endpoint down for 30 seconds, slow
## machines, malformed Talos facts. FAULTS_LOG_DIR keeps talos-ccm's logs.
test-faults:
	@assets="$$(hack/envtest.sh)" && \
		echo "using envtest binaries in $$assets" && \
		KUBEBUILDER_ASSETS="$$assets" $(GOTEST_ENV) $(GO) test $(GOTEST_FLAGS) -tags faults -v ./test/faults/

## test-k8s-versions: node initialization, kubelet serving CSR approval, the chart's RBAC (and the secure
## metrics' TokenReview and SubjectAccessReview) and the manifests' server-side dry run, against each
## older supported Kubernetes minor (hack/envtest.sh list, all but the current one, which `make test`
## covers), building the apiservers it lacks. Every minor runs even when one fails.
K8S_VERSION_TESTS ?= ^(TestKubernetesVersion|TestNodesInitializedWithExpectedFacts|TestKubeletServingCSRs|TestCSRApprovalWithoutTalos|TestManifestsDryRun|TestRBACGrantsWhatTheControllersNeed|TestTalosCCMRunsWithTheChartIdentity|TestSecureMetricsWithTheChartRBAC)$$
test-k8s-versions:
	@current="$$(hack/envtest.sh list | tail -n 1)" && failed="" && \
	for minor in $$(hack/envtest.sh list); do \
		[ "$$minor" = "$$current" ] && continue; \
		assets="$$(hack/envtest.sh "$$minor")" || { failed="$$failed $$minor"; continue; }; \
		echo "Kubernetes $$minor: envtest binaries in $$assets"; \
		KUBEBUILDER_ASSETS="$$assets" TALOS_CCM_EXPECT_K8S_MINOR="$$minor" $(GOTEST_ENV) \
			$(GO) test $(GOTEST_FLAGS) -run '$(K8S_VERSION_TESTS)' ./test/e2e ./test/deploy || failed="$$failed $$minor"; \
	done; \
	if [ -n "$$failed" ]; then echo "test-k8s-versions: failed on Kubernetes$$failed"; exit 1; fi

## test-bench-functions: every Benchmark function run once (-benchtime=1x), so that none of them rots
## unnoticed: `make test` runs no benchmark. The packages are found by their Benchmark functions; some need
## envtest.
test-bench-functions:
	@assets="$$(hack/envtest.sh)" && \
		pkgs="$$(grep -rl --include='*_test.go' '^func Benchmark' cmd internal pkg test | xargs -n1 dirname | sort -u | sed 's|^|./|')" && \
		echo "running the Benchmark functions of$$(echo $$pkgs | sed 's/^/ /')" && \
		KUBEBUILDER_ASSETS="$$assets" $(GO) test -count=1 -timeout 25m -run '^$$' -bench . -benchtime=1x $$pkgs

## test-fuzz: a short run of every fuzz target (CSR decisions, the config file and its load balancer pools,
## the LoadBalancer IP planner, Talos facts, rule templates, the Node planner over forged ownership
## annotations, the wire-level trimming of the Nodes the apiserver sends):
## no panic on hostile input. The budget is a count of executions per target (FUZZTIME, default 20000x;
## minimizing a new input: FUZZMINIMIZETIME, default 200x), not a duration: Go 1.26's fuzz coordinator can
## report its own -fuzztime deadline as a failure ("context deadline exceeded", golang/go#75804), and a
## count has no deadline to race.
FUZZTIME ?= 20000x
FUZZMINIMIZETIME ?= 200x
FUZZFLAGS = -run '^$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME)
test-fuzz:
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzDecideCSR$$' ./internal/controllers/csr
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzParse$$' ./internal/configfile
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzParseLoadBalancer$$' ./internal/configfile
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzPlanServiceIPs$$' ./internal/controllers/ipam
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzTalosFacts$$' ./internal/controllers/talos
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzRenderTemplate$$' ./internal/rules
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzPlanObjectIgnoresCopies$$' ./internal/k8ssink
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzTrimNodeEnvelope$$' ./internal/kubeclient
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzProtobufEventsAsClientGo$$' ./internal/kubeclient

## generate: regenerate protobuf Go code from api/proto.
generate:
	@hack/generate.sh

## demo: a local control plane, a simulated Talos fleet and talos-ccm initializing it.
demo: build
	@hack/demo.sh

## bench: initialize 100, 1,000 and 5,000 simulated nodes (and 1,000 with one machine answering in 3 s),
## measured against a floor of the same Node writes by a bare client without a client-side rate limit (and
## again at talos-ccm's default QPS), talos-ccm running with its default flags, then the CSR flood scenario
## (--flood). Results in bench/results (report.txt, results.csv, plots, logs, profiles); 5 idle minutes
## each (10 at 5,000 nodes): takes about 35 minutes on two cores. `make bench-readme` then copies report.txt into the README.
bench: build
	@assets="$$(hack/envtest.sh)" && KUBEBUILDER_ASSETS="$$assets" $(GO) run ./test/bench --nodes 100,1000,5000 --idle 5m --idle-largest 10m --slow-at 1000

## bench-quick: the same at 1,000 nodes with one idle minute.
bench-quick: build
	@assets="$$(hack/envtest.sh)" && KUBEBUILDER_ASSETS="$$assets" $(GO) run ./test/bench --nodes 1000 --idle 1m --slow-at 1000

## bench-clusters: what embedded clusters cost a host (issue 36): 1,000 clusters of 3 Nodes each in one host
## process embedding pkg/ccm/clusters, on three envtest apiservers they share through node selectors; heap,
## goroutines and connections per idle cluster, idle CPU, time to the first Node while 50 clusters start at
## once, fairness against a cluster of 2,000 Nodes, idle status writes, the heap once every cluster is
## removed. The markdown table goes to bench/clusters/report.md. BENCH_CLUSTERS_FLAGS changes the counts
## (e.g. "--clusters 200 --idle 30s"; see go run ./test/benchclusters --help).
BENCH_CLUSTERS_FLAGS ?=
bench-clusters:
	@assets="$$(hack/envtest.sh)" && KUBEBUILDER_ASSETS="$$assets" $(GO) run ./test/benchclusters $(BENCH_CLUSTERS_FLAGS)

## bench-readme: replace the table between <!-- bench-table:begin --> and <!-- bench-table:end --> in
## README.md with bench/results/report.txt (the README's table is never edited by hand).
bench-readme:
	@hack/bench-readme.sh

## lint: go vet (also over the fault suite, behind the faults build tag), then golangci-lint with .golangci.yml;
## hack/lint.sh builds golangci-lint at the version pinned in hack/lint/go.mod (once per version).
lint:
	$(GO) vet ./...
	$(GO) vet -tags faults ./test/faults/
	@golangci_lint="$$(hack/lint.sh)" && "$$golangci_lint" run --config .golangci.yml ./...

clean:
	rm -rf $(BIN)
