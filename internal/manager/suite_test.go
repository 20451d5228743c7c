package manager_test

import (
	"os"
	"testing"

	"github.com/longhorn/diskschedule/test/framework/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) { env = e }))
}
