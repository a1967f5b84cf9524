from cni_shim.main import main

main()
