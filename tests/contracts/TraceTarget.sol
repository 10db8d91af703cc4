// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.30;

// Test contracts for edgeplane's end-to-end tests. One call to TraceTarget.run produces every kind of frame a
// trace_filter result can hold: call, delegatecall, staticcall, create, create2, a caught revert, an out-of-gas
// inner call and a selfdestruct, plus one event for eth_getLogs.

contract Helper {
    uint256 public stored; // slot 0, written through delegatecall into TraceTarget's slot 0

    function ping(uint256 x) external payable returns (uint256) {
        // A nested frame: the external self-call is a staticcall one level deeper.
        return this.echo(x) + 1;
    }

    function echo(uint256 x) external pure returns (uint256) {
        return x;
    }

    function store(uint256 x) external payable {
        stored = x;
    }

    function fail() external pure {
        revert("helper failed");
    }

    function spin() external view returns (uint256 n) {
        while (gasleft() > 0) {
            n += 1;
        }
    }
}

contract Child {
    uint256 public immutable tag;

    constructor(uint256 t) payable {
        tag = t;
    }

    function destroy(address payable to) external {
        selfdestruct(to);
    }
}

contract TraceTarget {
    uint256 public stored; // slot 0, shared layout with Helper
    Helper public immutable helper;

    event Traced(address indexed caller, uint256 indexed tag, address created, address created2);

    constructor() {
        helper = new Helper();
    }

    function run(uint256 tag) external payable returns (address created, address created2) {
        helper.ping{value: 1}(tag); // call, with a nested staticcall inside
        helper.echo(tag); // staticcall
        (bool ok,) = address(helper).delegatecall(abi.encodeCall(Helper.store, (tag)));
        require(ok, "delegatecall failed");

        Child child = new Child{value: 1}(tag); // create
        Child child2 = new Child{salt: bytes32(tag)}(tag); // create2

        try helper.fail() {} catch {} // reverted inner call, caught
        (ok,) = address(helper).call{gas: 5000}(abi.encodeCall(Helper.spin, ())); // out of gas, returns false

        child.destroy(payable(msg.sender)); // selfdestruct of a contract created in this transaction

        emit Traced(msg.sender, tag, address(child), address(child2));
        return (address(child), address(child2));
    }

    function total(uint256 a, uint256 b) external view returns (uint256) {
        return a + b + stored;
    }

    function requirePositive(uint256 x) external pure returns (uint256) {
        require(x > 0, "value must be positive");
        return x;
    }
}
