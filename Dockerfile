# Multi-stage build for linux/amd64 and linux/arm64:
#   docker buildx build --platform linux/amd64,linux/arm64 -t tendril .
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "-s -w" -o /out/tendril ./cmd/tendril

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tendril /usr/local/bin/tendril
ENV TENDRIL_HOME=/data TENDRIL_ADDR=0.0.0.0:8080
VOLUME /data
EXPOSE 8080
# A non-loopback address needs TENDRIL_AUTH_TOKEN; pass it at run time.
ENTRYPOINT ["/usr/local/bin/tendril"]
CMD ["serve"]
