"""The group layer: the embedded Connect protocol, assignors, membership, the herder and the group records.

Where a rebalance decision is made: the assignors decide who owns what (``assignor.leader_assign``, which
picks ``eager_assignor``, ``cooperative_assignor`` or ``static_assignor``); under ``group.protocol=connect``
the coordinating leader turns that into a target (``coordinator``) and each member reconciles toward its
share (``reconciler``). The herder (``herder``) decides only how this worker moves from what it runs to
what it owns. The rest, by concept:

* the wire: ``protocol`` (Connect's metadata and assignments), ``membership_messages`` and ``membership``
  (the classic group member as a state machine), ``transport`` (its network), ``member`` (Connect's use);
* the herder: ``herder`` (the state machine), ``herder_actions`` (what it asks the shell to do),
  ``herder_inputs`` (what the shell hands it besides events), ``herder_reconciliation`` (its steps under
  ``group.protocol=connect``), ``restart_plan`` (what a restart request restarts);
* the group records (the KIP-848 seed): ``group_record_types``, ``group_record_codec``, ``group_records``
  (the fold); ``target_assignment`` (readings of a target: shares, the epoch check, a scheduled
  rebalance); ``leader_memory`` (a new leader's memory); ``group_view`` (``GET /group``);
* warm-up and self-healing: ``handover``, ``learner``, ``auto_restart``.
"""
