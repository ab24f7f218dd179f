package storetest

import "testing"

func testRecords(t *testing.T, open Opener) {}
