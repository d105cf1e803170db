package bedrock_test

import (
	"github.com/tendrilai/tendril/internal/model"
	"github.com/tendrilai/tendril/internal/model/bedrock"
)

var _ model.StreamProvider = (*bedrock.Provider)(nil)
