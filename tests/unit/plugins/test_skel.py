import io
import json

import pytest

from plugins import skel

ENV = {
    "CNI_COMMAND": "ADD",
    "CNI_CONTAINERID": "c1",
    "CNI_NETNS": "/run/netns/x",
    "CNI_IFNAME": "net1",
    "CNI_PATH": "/opt/cni/bin",
}
CONF = {"cniVersion": "1.0.0", "name": "n", "type": "t"}


def run(env, conf=CONF, handlers=None):
    out = io.StringIO()
    stdin = io.BytesIO(conf if isinstance(conf, bytes) else json.dumps(conf).encode())
    calls = []

    def handler(args):
        calls.append(args)
        return {"cniVersion": args.cni_version, "seen": args.ifname}

    rc = skel.run(
        handlers if handlers is not None else {"ADD": handler, "DEL": handler},
        environ=env,
        stdin=stdin,
        stdout=out,
    )
    text = out.getvalue()
    return rc, (json.loads(text) if text else None), calls


def test_add_passes_env_and_config_to_handler():
    rc, out, calls = run(ENV)
    assert rc == 0
    assert out == {"cniVersion": "1.0.0", "seen": "net1"}
    assert calls[0].container_id == "c1" and calls[0].conf["name"] == "n"


def test_missing_env_variables_are_listed_in_walk_order():
    env = {"CNI_COMMAND": "ADD", "CNI_IFNAME": "net1"}
    rc, out, calls = run(env)
    assert rc == 1 and not calls
    assert out["code"] == 4
    assert out["msg"] == "required env variables [CNI_CONTAINERID,CNI_NETNS,CNI_PATH] missing"


def test_del_does_not_need_netns():
    env = {k: v for k, v in ENV.items() if k != "CNI_NETNS"} | {"CNI_COMMAND": "DEL"}
    rc, _, calls = run(env)
    assert rc == 0 and calls


@pytest.mark.parametrize(
    ("ifname", "msg"),
    [
        ("a/b", "interface name contains / or : or whitespace characters"),
        ("..", "interface name is . or .."),
        ("x" * 16, "interface name is too long"),
    ],
)
def test_bad_ifname(ifname, msg):
    rc, out, _ = run(ENV | {"CNI_IFNAME": ifname})
    assert (rc, out["code"], out["msg"]) == (1, 4, msg)


def test_bad_container_id():
    rc, out, _ = run(ENV | {"CNI_CONTAINERID": "-bad"})
    assert (rc, out["code"], out["msg"], out["details"]) == (
        1,
        4,
        "invalid characters in containerID",
        "-bad",
    )


def test_version_ignores_stdin():
    rc, out, _ = run({"CNI_COMMAND": "VERSION"}, conf=b"not json")
    assert rc == 0
    assert out == {"cniVersion": "1.1.0", "supportedVersions": list(skel.ALL_VERSIONS)}


def test_bad_json_is_code_6_and_missing_name_code_7():
    assert run(ENV, conf=b"{")[1]["code"] == 6
    assert run(ENV, conf={"cniVersion": "1.0.0"})[1] == {
        "cniVersion": "1.0.0",
        "code": 7,
        "msg": "missing network name",
    }


def test_unsupported_version_is_code_1():
    rc, out, _ = run(ENV, conf=CONF | {"cniVersion": "9.9.9"})
    assert (rc, out["code"], out["msg"]) == (1, 1, "incompatible CNI versions")


def test_check_needs_040():
    rc, out, _ = run(ENV | {"CNI_COMMAND": "CHECK"}, conf=CONF | {"cniVersion": "0.3.1"})
    assert (rc, out["msg"]) == (1, "config version does not allow CHECK")


def test_unknown_command_after_config():
    rc, out, _ = run(ENV | {"CNI_COMMAND": "FROB"})
    assert (rc, out["code"], out["msg"]) == (1, 4, "unknown CNI_COMMAND: FROB")


def test_handler_errors_become_cni_errors():
    def typed(_args):
        raise skel.CniError(11, "later", "d")

    def untyped(_args):
        raise RuntimeError("boom")

    assert run(ENV, handlers={"ADD": typed})[1] == {
        "cniVersion": "1.0.0",
        "code": 11,
        "msg": "later",
        "details": "d",
    }
    assert run(ENV, handlers={"ADD": untyped})[1] == {"cniVersion": "1.0.0", "code": 999, "msg": "boom"}


def test_missing_handler_is_a_silent_success():
    rc, out, _ = run(ENV | {"CNI_COMMAND": "GC"}, conf=CONF | {"cniVersion": "1.1.0"}, handlers={})
    assert (rc, out) == (0, None)


def test_cni_args_parsing():
    args = skel.CmdArgs("ADD", "c", "", "i", "IgnoreUnknown=1;MAC=02:00:00:00:00:01", "", b"", {})
    assert args.cni_args() == {"IgnoreUnknown": "1", "MAC": "02:00:00:00:00:01"}
    with pytest.raises(skel.CniError, match="invalid pair"):
        skel.CmdArgs("ADD", "c", "", "i", "novalue", "", b"", {}).cni_args()


def test_cni_error_is_a_reasoned_error():
    err = skel.CniError(7, "bad config")
    assert err.reason == "CniInvalidNetworkConfig"
    assert err.to_json("1.0.0") == {"cniVersion": "1.0.0", "code": 7, "msg": "bad config"}
