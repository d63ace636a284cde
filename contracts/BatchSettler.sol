// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

interface IERC20Like {
    function transfer(address to, uint256 value) external returns (bool);
    function transferFrom(address from, address to, uint256 value) external returns (bool);
}

/// @title BatchSettler
/// @notice Moves a batch of captured charges from payers to payees with transferFrom, in one transaction sent by
/// the marketplace's operator. Payers approve this contract (an ERC-20 allowance is their spending cap), or have paid
/// it in advance (an EIP-3009 authorization with this contract as payee, as x402 payments are): legs whose payer is
/// this contract are paid from its own balance.
/// A batch id executes at most once. Each payer's legs succeed or fail together: a payer whose allowance or
/// balance no longer covers their legs is skipped (and reported in an event) while everyone else is settled.
/// Each batch commits, in the same transaction, to the Merkle root of the signed receipts of the charges it carries.
contract BatchSettler {
    struct Leg {
        address payer;
        address payee;
        uint256 amount;
    }

    IERC20Like public immutable token;
    address public immutable operator;

    /// @notice Block in which each batch id was executed, zero when never: how a restarted sender finds its batch.
    mapping(bytes32 => uint256) public executedAt;

    event BatchSettled(bytes32 indexed batchId, uint256 legs, uint256 paid, uint256 failed);
    event PayerFailed(bytes32 indexed batchId, address indexed payer, uint256 amount);
    /// @notice The Merkle root of the receipts of the charges the batch carries (docs/architecture.md, "Receipts").
    event ReceiptsCommitted(bytes32 indexed batchId, bytes32 receiptsRoot);

    error NotOperator();
    error NotSelf();
    error BatchAlreadyExecuted(bytes32 batchId);
    error TransferRefused(address payer, address payee, uint256 amount);
    error OutOfGas();

    constructor(IERC20Like token_, address operator_) {
        token = token_;
        operator = operator_;
    }

    /// @notice Settles the legs of one batch and records the root of its receipts. Legs of one payer must be adjacent
    /// (one group per payer).
    function settle(bytes32 batchId, bytes32 receiptsRoot, Leg[] calldata legs) external {
        if (msg.sender != operator) revert NotOperator();
        if (executedAt[batchId] != 0) revert BatchAlreadyExecuted(batchId);
        executedAt[batchId] = block.number;
        emit ReceiptsCommitted(batchId, receiptsRoot);
        uint256 paid;
        uint256 failed;
        uint256 i;
        while (i < legs.length) {
            address payer = legs[i].payer;
            uint256 total = legs[i].amount;
            uint256 j = i + 1;
            while (j < legs.length && legs[j].payer == payer) {
                total += legs[j].amount;
                j++;
            }
            uint256 gasBefore = gasleft();
            try this.collect(payer, legs[i:j]) {
                paid += total;
            } catch {
                // A call that ran out of gas leaves at most 1/64 of the gas behind: that is the sender's fault
                // (too low a gas limit), never the payer's, so the whole batch reverts instead of blaming the payer.
                if (gasleft() <= gasBefore / 64) revert OutOfGas();
                failed += total;
                emit PayerFailed(batchId, payer, total);
            }
            i = j;
        }
        emit BatchSettled(batchId, legs.length, paid, failed);
    }

    /// @notice One payer's legs, all or none. Callable only by this contract, from settle.
    function collect(address payer, Leg[] calldata legs) external {
        if (msg.sender != address(this)) revert NotSelf();
        bool prepaid = payer == address(this);
        for (uint256 k; k < legs.length; k++) {
            bool sent = prepaid
                ? token.transfer(legs[k].payee, legs[k].amount)
                : token.transferFrom(payer, legs[k].payee, legs[k].amount);
            if (!sent) revert TransferRefused(payer, legs[k].payee, legs[k].amount);
        }
    }
}
