# Builds the diskschedule images: the manager (the default, last stage) and
# the second scheduler, kube-scheduler with the diskschedule plugin compiled
# in (docker build --target scheduler).
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
COPY go.mod go.sum ./
# go.mod replaces some of Longhorn's modules with the copies under
# third_party/ (third_party/README.md): go mod download reads them.
COPY third_party/ third_party/
RUN go mod download
COPY cmd/*.go cmd/
COPY cmd/diskschedule-scheduler/ cmd/diskschedule-scheduler/
COPY api/ api/
COPY config/ config/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -o manager ./cmd
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -o diskschedule-scheduler ./cmd/diskschedule-scheduler

# The second scheduler (DESIGN §6.1): kube-scheduler's flags, a
# KubeSchedulerConfiguration whose profile enables the diskschedule plugin.
FROM gcr.io/distroless/static:nonroot AS scheduler
WORKDIR /
COPY --from=builder /workspace/diskschedule-scheduler .
USER 65532:65532
ENTRYPOINT ["/diskschedule-scheduler"]

# The manager.
FROM gcr.io/distroless/static:nonroot AS manager
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532
ENTRYPOINT ["/manager"]
