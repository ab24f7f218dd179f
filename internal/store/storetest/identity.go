package storetest

import "testing"

func testIdentity(t *testing.T, open Opener) {}
