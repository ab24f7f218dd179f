package storetest

import "testing"

func testTasks(t *testing.T, open Opener) {}
