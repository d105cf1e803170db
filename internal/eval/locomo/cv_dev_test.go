package locomo

import (
	"context"
	"os"
	"testing"
)

// TestCrossValidateDev runs leave-one-conversation-out cross-validation on
// the dev split when LOCOMO_DATA and LOCOMO_CV are set (LOCOMO_CV=records
// for the records level).
func TestCrossValidateDev(t *testing.T) {
	path := os.Getenv("LOCOMO_DATA")
	if path == "" || os.Getenv("LOCOMO_CV") == "" {
		t.Skip("set LOCOMO_DATA and LOCOMO_CV (events or records) to cross-validate on the dev split")
	}
	convs, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := CrossValidate(context.Background(), convs, CVOptions{Level: os.Getenv("LOCOMO_CV")})
	if err != nil {
		t.Fatal(err)
	}
	cv.WriteText(os.Stdout)
	if cv.CrossValidated.Questions != cv.InSample.Questions {
		t.Fatalf("cross-validated %d questions, in-sample %d", cv.CrossValidated.Questions, cv.InSample.Questions)
	}
}
