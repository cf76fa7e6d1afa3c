# hwnet build, test, benchmark and demo entry points. Everything runs on a
# fresh machine: `make deps` installs what the tests need.
GO        ?= go
BIN       := bin
PKGS      := ./...
# Root tests fail instead of skipping when this is 1 (CI sets it).
HWNET_REQUIRE_ROOT ?= 0
FUZZTIME  ?= 10s
# The Kubernetes version whose kube-apiserver and etcd the CNI tests run.
KUBE_VERSION ?= v1.37.1
# The e2e cluster's containerd (test/e2e/cluster's DefaultContainerdVersion);
# CONTAINERD_VERSION=v1.7.35 builds 1.7, which HWNET_E2E_CONTAINERD=v1.7.35
# or hwnet-cluster --containerd v1.7.35 then runs.
CONTAINERD_VERSION ?= v2.4.2
# What --version prints (internal/version): VERSION (below, the checkout's
# git describe), as the image build stamps it; GOFLAGS=-buildvcs=false
# leaves nothing else. Expanded only by the targets that build.
LDFLAGS    = -X github.com/hwnet-io/hwnet/internal/version.stamped=$(VERSION)
# The shipped binaries' build tags (test/e2e/image's BuildTags, as the
# Dockerfile): grpc without golang.org/x/net/trace, whose text/template
# keeps every exported method in the binary.
BUILDTAGS  = grpcnotrace

.PHONY: all build test unit soak soak-ledger deps kube-bins containerd-cdi lint bench bench-peers bench-cluster bench-scale bench-discovery fuzz demo demo-node clean

all: build

build:
	$(GO) build -tags $(BUILDTAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/... ./test/e2e/cmd/...
	CGO_ENABLED=0 $(GO) build -o $(BIN)/hwnet-test-plugin ./test/cniplugins/recorder

deps:
	bash test/install-deps.sh

# kube-apiserver, etcd and the node binaries from the Go module proxy,
# built once per version into /var/cache/hwnet-ci/kube (11-47 minutes cold
# on 2 cores, up to 4 GB of memory; nothing when cached).
kube-bins:
	bash test/kubeapi/build-kube.sh $(KUBE_VERSION)

# containerd 2.x (and its runc shim) from the Go module proxy, for CDI
# (DRA) and CNI STATUS in the e2e cluster; Debian 12's 1.6 reads no CDI
# specs. About 3 minutes cold, once.
containerd-cdi:
	GO=$(GO) bash test/e2e/build-containerd.sh $(CONTAINERD_VERSION)

# staticcheck is pinned in go.mod's tool block: unused code, deprecated
# calls and unreachable returns fail the build like vet's findings.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

# The whole suite: unit, root (virtual node with real netns and veth) and
# fuzz seed corpora, with -race. Helm is for the chart's tests. The e2e
# package alone takes 10-20 min on 2 cores, past go test's default 10 min
# timeout. test/suite.sh starts the longest packages first, and the e2e
# multi-node tests and the five longest one-node ones in processes of
# their own, each on its own cluster; TESTPAR test processes run at once
# beside them, as the e2e tests mostly wait on their clusters.
TESTPAR   ?= 3
test: deps lint kube-bins containerd-cdi helm
	HWNET_REQUIRE_ROOT=$(HWNET_REQUIRE_ROOT) bash test/suite.sh $(GO) $(TESTPAR) $(PKGS)

# The device hand-out under random interleavings (agent/handout_test.go,
# issue 41) for STEPS steps from SEED, root: `make test` runs 60 from seed
# 1. A failure prints the seed and steps of the sequence that broke, which
# SEED=<that seed> STEPS=<its length> replays. SOAKTIME bounds the run;
# each sequence that passes logs a line (every step, for up to 300 steps).
# SKIP=step,... leaves steps out, to soak the rest around a known bug;
# FOR=2h ends the run, with its summary, after the sequence that passes 2h.
SEED     ?= 1
STEPS    ?= 10000
SOAKTIME ?= 24h
SKIP     ?=
FOR      ?=
soak: deps kube-bins
	HWNET_REQUIRE_ROOT=1 HWNET_HANDOUT_SEED=$(SEED) HWNET_HANDOUT_STEPS=$(STEPS) HWNET_HANDOUT_SKIP=$(SKIP) HWNET_HANDOUT_FOR=$(FOR) \
		$(GO) test -count=1 -v -run '^TestHandout$$' -timeout $(SOAKTIME) ./agent

# The Book (node/ledger) under random interleavings of every hand-out,
# give-back and fault of its sources, for STEPS steps from SEED: a few
# thousand steps a second, no root. `make test` runs 5000 from seed 1.
soak-ledger:
	HWNET_LEDGER_SEED=$(SEED) HWNET_LEDGER_STEPS=$(STEPS) \
		$(GO) test -count=1 -v -run '^TestBookInterleavings$$' -timeout $(SOAKTIME) ./node/ledger

# Unit tests only: no root, no network namespaces.
unit:
	$(GO) test -count=1 -short $(PKGS)

bench:
	$(GO) test -run='^$$' -bench=. -benchmem $(PKGS)

# hwnet's whole processes beside sriovdp and Multus thin and thick on one
# virtual node, interleaved rounds, one table (root; test/bench/README.md).
bench-peers: kube-bins
	bash test/bench/peers.sh

# Pod start as users feel it on the e2e cluster: hwnet's device plugin and
# DRA pools and the peer stack (Multus thick + sriovdp) as DaemonSets, 1, 20
# and 100 CNF pods at once, interleaved rounds, one table (root, takes the
# e2e lock; test/bench/README.md). BENCH_ARGS="-rounds 3 -pods 1,20,100";
# NODES=3 spreads the pods over two SR-IOV workers.
bench-cluster: kube-bins containerd-cdi
	BENCH_ARGS="$(BENCH_ARGS)" NODES=$(NODES) bash test/bench/cluster.sh

# The shape of Multus issue #1344 (pods with 5 InfiniBand VFs, created at
# once on many nodes) against one real kube-apiserver: an hwnet-agent per
# node, pod-ready p50/p99 and API requests per pod (root;
# test/bench/README.md). SCALE_ARGS="-scale-nodes 10,50 ..." to resize.
bench-scale: kube-bins
	$(GO) test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -timeout 2h ./test/bench/peers -args $(SCALE_ARGS)

# Discovery alone beside sriovdp's, one virtual node per size (root).
bench-discovery:
	BUILDTAGS="$(BUILDTAGS)" bash test/bench/discovery-peers.sh

# Each fuzz target for FUZZTIME.
fuzz:
	bash test/fuzz.sh $(FUZZTIME)

# The main job: a real single-node Kubernetes on a virtual SR-IOV node
# (test/e2e/cluster), hwnet deployed from deploy/, a CNF pod with SR-IOV,
# DPDK and InfiniBand attachments. The cluster keeps running. NODES=3 makes
# a control plane and two workers, the last without SR-IOV hardware.
NODES ?= 1
demo: build kube-bins containerd-cdi
	$(BIN)/hwnet-cluster --repo . --nodes $(NODES) demo

# The virtual SR-IOV node alone: its inventory and pools, no Kubernetes.
demo-node: build
	bash test/demo.sh

clean:
	rm -rf $(BIN)

# --- install and image (issue 17) ---
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
TOOLS     ?= /var/cache/hwnet-ci/tools
HELM_VERSION ?= v3.22.0
IMAGE     ?= hwnet:$(VERSION)

.PHONY: helm image image-buildah

# Helm from the Go module proxy, for deploy/'s chart test and helm lint
# (the build cache makes a second install take a second).
helm:
	GOBIN=$(TOOLS) CGO_ENABLED=0 $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# hwnet's image as a docker-archive tarball, bin/image/hwnet-image.tar, and
# for linux/amd64 and linux/arm64 (cross-compiled) as one OCI image index,
# bin/image/hwnet-image-oci.tar, written by the e2e harness's own image
# builder: no container daemon. Tagged hwnet:$(git describe); `docker
# build .` gives the same image.
image:
	$(GO) build -o $(BIN)/ ./test/e2e/cmd/hwnet-cluster
	$(BIN)/hwnet-cluster --repo . --image-dir $(BIN)/image --ref $(IMAGE) image

# The Dockerfile built by Buildah (Debian's buildah) into its storage,
# tagged $(IMAGE), and saved as bin/image/hwnet-buildah.tar (docker-archive).
# LOCAL_BASES=1 builds it on local stand-ins of the base images, with no
# registry and no network (test/buildah/bud-local.sh).
image-buildah:
	mkdir -p $(BIN)/image
	$(if $(LOCAL_BASES),bash test/buildah/bud-local.sh,buildah bud) --build-arg VERSION=$(VERSION) -t $(IMAGE) .
	rm -f $(BIN)/image/hwnet-buildah.tar
	buildah push $(IMAGE) docker-archive:$(BIN)/image/hwnet-buildah.tar:$(IMAGE)

# --- CRI network API (issue 14) ---
PROTOC_GEN_GO_VERSION      ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.5.1

.PHONY: crinet-proto

# Regenerates api/crinet/v1alpha1's Go code from crinet.proto: protoc from Debian
# (protobuf-compiler), its Go plugins from the Go module proxy.
crinet-proto:
	command -v protoc >/dev/null || apt-get install -y protobuf-compiler
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	cd api/crinet/v1alpha1 && PATH=$(TOOLS):$$PATH protoc --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative crinet.proto
