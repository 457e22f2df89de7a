"""Access control lists, as Kafka's StandardAuthorizer applies them.

- `model.py`: the vocabulary (resource types, pattern types, operations, permissions, with Kafka's wire codes),
  `AclBinding` (one ACL) and `AclBindingFilter` (the filters of DescribeAcls and DeleteAcls).
- `authorizer.py`: the sans-I/O decision: `Authorizer.authorize(acls, principal, host, operation, resource)`
  over an index of the ACLs of the current metadata image, with `super.users` and
  `allow.everyone.if.no.acl.found`, plus the authorized-operations bit sets of KIP-430.
- `rules.py`: which operation on which resource every API needs (the table in docs/security.md).
- `wire.py`: ACLs to and from CreateAcls, DescribeAcls and DeleteAcls messages, for `moldau acls` and the console.

ACLs are metadata records (`moldau.metadata.records.AccessControlEntryRecord`), so every node enforces the same
ones and they survive restarts.
"""
