module github.com/k8snetworkplumbingwg/auto-sriov/tests/go/contract

go 1.26
