#!/usr/bin/env bash
# Builds and deploys Tendril on Amazon Bedrock AgentCore Runtime with
# deploy/agentcore/template.yaml: pushes the linux/arm64 image to ECR,
# uploads the relay's Lambda zip to S3, deploys the stack and registers the
# Telegram webhook. Needs the AWS CLI (configured), docker buildx or buildah,
# Go, and zip.
#
#   STACK=tendril BUCKET=my-artifacts TELEGRAM_BOT_TOKEN=... TELEGRAM_WEBHOOK_SECRET=$(openssl rand -hex 24) \
#   DATABASE_MODE=aurora VPC_ID=vpc-... SUBNET_IDS=subnet-a,subnet-b deploy/agentcore/deploy.sh
#
# DATABASE_MODE=existing with DATABASE_URL=postgres://... skips Aurora.
# Extra CloudFormation parameter overrides go in PARAMS ("Key=Value ...").
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${STACK:=tendril}" "${BUCKET:?S3 bucket for the relay zip}" "${TELEGRAM_BOT_TOKEN:?}" "${TELEGRAM_WEBHOOK_SECRET:?}"
: "${DATABASE_MODE:=aurora}" "${TAG:=$(git rev-parse --short=12 HEAD)}"
region=$(aws configure get region || true); region=${AWS_REGION:-$region}
account=$(aws sts get-caller-identity --query Account --output text)
repo="$account.dkr.ecr.$region.amazonaws.com/tendril"
image="$repo:$TAG"

echo "== image $image (linux/arm64)"
aws ecr describe-repositories --repository-names tendril >/dev/null 2>&1 ||
  aws ecr create-repository --repository-name tendril --image-scanning-configuration scanOnPush=true >/dev/null
aws ecr get-login-password | (command -v buildah >/dev/null && buildah login --username AWS --password-stdin "${repo%%/*}" ||
  docker login --username AWS --password-stdin "${repo%%/*}")
if command -v buildah >/dev/null; then
  buildah build --platform linux/arm64 --build-arg VERSION="$TAG" -t "$image" . && buildah push "$image"
else
  docker buildx build --platform linux/arm64 --build-arg VERSION="$TAG" -t "$image" --push .
fi

echo "== relay s3://$BUCKET/tendril-relay-$TAG.zip"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -trimpath -tags lambda.norpc -ldflags "-s -w" -o "$tmp/bootstrap" ./cmd/tendril-relay
(cd "$tmp" && zip -q -X tendril-relay.zip bootstrap)
aws s3 cp "$tmp/tendril-relay.zip" "s3://$BUCKET/tendril-relay-$TAG.zip" >/dev/null

echo "== stack $STACK"
overrides=(ImageUri="$image" RelayCodeBucket="$BUCKET" RelayCodeKey="tendril-relay-$TAG.zip"
  TelegramBotToken="$TELEGRAM_BOT_TOKEN" TelegramWebhookSecret="$TELEGRAM_WEBHOOK_SECRET" DatabaseMode="$DATABASE_MODE")
[ -n "${DATABASE_URL:-}" ] && overrides+=(ExistingDatabaseUrl="$DATABASE_URL")
[ -n "${VPC_ID:-}" ] && overrides+=(VpcId="$VPC_ID")
[ -n "${SUBNET_IDS:-}" ] && overrides+=(SubnetIds="$SUBNET_IDS")
[ -n "${TELEGRAM_ALLOWED_CHAT_IDS:-}" ] && overrides+=(TelegramAllowedChatIds="$TELEGRAM_ALLOWED_CHAT_IDS")
# shellcheck disable=SC2206
overrides+=(${PARAMS:-})
aws cloudformation deploy --stack-name "$STACK" --template-file deploy/agentcore/template.yaml \
  --capabilities CAPABILITY_IAM --parameter-overrides "${overrides[@]}"

url=$(aws cloudformation describe-stacks --stack-name "$STACK" --query "Stacks[0].Outputs[?OutputKey=='WebhookUrl'].OutputValue" --output text)
echo "== webhook $url"
go run ./cmd/tendril telegram set-webhook --url "$url"
