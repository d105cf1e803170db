# Tendril's container image: static, non-root, linux/arm64 and linux/amd64.
# The same image runs on Amazon Bedrock AgentCore Runtime (arm64,
# TENDRIL_RUNTIME=agentcore) and on any container host (docs/deploy.md).
#
#   docker buildx build --platform linux/arm64,linux/amd64 -t tendril .
#   buildah build --platform linux/arm64 -t tendril .
#
# Stage 1 cross-compiles with CGO off (the SQLite driver is pure Go), so
# the build runs natively on the builder's platform for either target.
FROM --platform=$BUILDPLATFORM docker.io/library/golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=""
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# timetzdata embeds the IANA zones cron jobs name; the image has no tzdata.
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -tags timetzdata \
      -ldflags "-s -w ${VERSION:+-X main.version=$VERSION}" -o /out/tendril ./cmd/tendril \
 && mkdir -p /out/data /out/etc/tendril \
 && cp -r examples /out/etc/tendril/examples \
 && echo 'tendril:x:65532:65532:tendril:/data:/sbin/nologin' > /out/etc/passwd \
 && echo 'tendril:x:65532:' > /out/etc/group

# Stage 2: nothing but the binary, CA roots, the example personas and an
# empty home owned by the unprivileged user.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/etc/ /etc/
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build /out/tendril /usr/local/bin/tendril
USER 65532:65532
ENV TENDRIL_HOME=/data TENDRIL_ADDR=0.0.0.0:8080
VOLUME /data
EXPOSE 8080
# A self-hosted container needs TENDRIL_AUTH_TOKEN (a non-loopback address
# without it is refused); on AgentCore set TENDRIL_RUNTIME=agentcore and
# TENDRIL_DATABASE_URL instead. Personas: /etc/tendril/examples/<name>.
ENTRYPOINT ["/usr/local/bin/tendril"]
CMD ["serve"]
